//go:build linux

package testutil_test

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// Fatalf records like Errorf and ends the goroutine, as testing.T does.
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// record runs f with a recorder over t (in a goroutine of its own, which
// a Fatalf ends) and returns what f failed with.
func record(t *testing.T, f func(testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msgs
}

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "case.golden")
	if msgs := record(t, func(tb testing.TB) { testutil.Golden(tb, path, "x\n") }); len(msgs) != 1 || !strings.Contains(msgs[0], "-update to create it") {
		t.Fatalf("missing golden file: %q", msgs)
	}
	if err := flag.Set("update", "true"); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, path, "one\ntwo\n")
	if err := flag.Set("update", "false"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "one\ntwo\n" {
		t.Fatalf("-update wrote %q, %v", b, err)
	}
	testutil.Golden(t, path, "one\ntwo\n")
	msgs := record(t, func(tb testing.TB) { testutil.Golden(tb, path, "one\nthree\n") })
	if len(msgs) != 1 || !strings.Contains(msgs[0], path+" differs") || !strings.Contains(msgs[0], `three`) {
		t.Fatalf("a differing text: %q", msgs)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	testutil.WaitFor(t, 5*time.Second, "three polls", func() bool { n++; return n == 3 })
	start := time.Now()
	msgs := record(t, func(tb testing.TB) { testutil.WaitFor(tb, 50*time.Millisecond, "never", func() bool { return false }) })
	if len(msgs) != 1 || msgs[0] != "timed out after 50ms waiting for never" {
		t.Fatalf("WaitFor on a false condition: %q", msgs)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("WaitFor gave up after %v, before its 50ms", d)
	}
}

// TestRunConch runs the built binary: its stdout, stderr and exit status
// come back, and the marker reaches what it starts.
func TestRunConch(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	stdout, stderr, code := testutil.RunConch(t, marker, "run", "--", "echo $"+testutil.MarkerEnv+"; echo err >&2; exit 3")
	if !strings.HasPrefix(stdout, marker+"\n") || !strings.Contains(stdout, "err") || code != 3 {
		t.Fatalf("conch run: stdout %q, stderr %q, exit %d", stdout, stderr, code)
	}
	if _, _, code := testutil.RunConch(t, marker, "no-such-command"); code != 2 {
		t.Fatalf("conch no-such-command: exit %d, want 2", code)
	}
}
