//go:build linux

package local_test

import (
	"os"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
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

// The helpers the provider suite uses serve the local provider's own
// tests too.
var (
	run       = shelltest.MustRun
	runCtx    = shelltest.MustRunContext
	start     = shelltest.MustStart
	code      = shelltest.ExitCode
	waitDone  = shelltest.WaitDone
	readUntil = shelltest.ReadUntil
)
