//go:build linux

package local_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// assertGone checks that nothing carrying marker is alive right now.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	if ps := testutil.Processes(marker); len(ps) > 0 {
		for _, p := range ps {
			t.Errorf("survivor pid %d: %s", p.Pid, testutil.Cmdline(p.Pid))
		}
	}
}

func TestSpawnFailureIsAnError(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Shell: "/nonexistent/bash"})
	spec, _ := ex.Resolve(shell.Request{Command: "true"})
	var se *shell.SpawnError
	if _, err := ex.Start(spec); !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "spawn failed: ") {
		t.Errorf("Start: %v", err)
	}
	if _, err := shell.Run(t.Context(), ex, spec); !errors.As(err, &se) {
		t.Errorf("Run: %v", err)
	}
	if _, err := ex.Launch(spec); !errors.As(err, &se) {
		t.Errorf("Launch: %v", err)
	}
}

func TestManyShortCommandsLeaveNothing(t *testing.T) {
	// 5000 commands took 155 s of a 306 s package run at load 20; a
	// descriptor, goroutine or zombie left per command shows in 500.
	n := testutil.SoakSize(200, 500, 5000)
	ex, _ := newExec(t, nil)
	// Warm up so that lazily created runtime resources are not counted.
	run(t, ex, shell.Request{Command: "true"})
	fds := testutil.FDs(t)
	goroutines := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			run(t, ex, shell.Request{Command: "true"})
		} else {
			p := start(t, ex, shell.Request{Command: "echo $$"})
			<-p.Done()
			p.Read()
		}
	}
	// The reaper runs at most every 50 ms: a zombie it has not reached
	// yet is not a leak, one that stays is.
	testutil.WaitFor(t, 3*time.Second, "no zombie children", func() bool { return len(testutil.ZombieChildren()) == 0 })
	testutil.AssertNoNewFDs(t, fds)
	if got := runtime.NumGoroutine(); got > goroutines+2 {
		t.Errorf("goroutines: %d before, %d after", goroutines, got)
	}
}
