package local_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// newExec returns an executor whose commands carry the test's marker, and
// checks at cleanup that it closes and leaves no process behind.
func newExec(t *testing.T, o *local.Options) (*local.Executor, string) {
	t.Helper()
	marker := testutil.Marker(t)
	var opts local.Options
	if o != nil {
		opts = *o
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	opts.Environ = append(opts.Environ, testutil.MarkerEnv+"="+marker)
	if opts.SpillParent == "" {
		opts.SpillParent = t.TempDir()
	}
	if opts.Grace == 0 {
		opts.Grace = 500 * time.Millisecond
	}
	ex, err := local.New(&opts)
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
	})
	return ex, marker
}

func run(t *testing.T, ex *local.Executor, r shell.Request) shell.Result {
	t.Helper()
	return runCtx(t, context.Background(), ex, r)
}

func runCtx(t *testing.T, ctx context.Context, ex *local.Executor, r shell.Request) shell.Result {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve(%+v): %v", r, err)
	}
	res, err := shell.Run(ctx, ex, spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", r.Command, err)
	}
	return res
}

func start(t *testing.T, ex *local.Executor, r shell.Request) shell.Process {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	p, err := ex.Start(spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", r.Command, err)
	}
	return p
}

func code(r shell.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

func waitDone(t *testing.T, p shell.Process, d time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("process not done after %v", d)
	}
}
