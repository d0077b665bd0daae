//go:build linux

package proc_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestWaitGone: WaitGone waits for processes that are not our children
// (a shell's sleeps) until they exit, and reports a timeout while one
// lives; a pid already reaped counts as gone.
func TestWaitGone(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "sleep 600 & sleep 601 & wait")
	done := waitAsync(cmd)
	var sleeps []proc.Info
	testutil.WaitFor(t, 5*time.Second, "two sleeps", func() bool {
		sleeps = append(withCmdline(marker, "sleep 600"), withCmdline(marker, "sleep 601")...)
		return len(sleeps) == 2
	})
	t0 := time.Now()
	if ok, err := proc.WaitGone(sleeps, 200*time.Millisecond); ok || err != nil {
		t.Fatalf("WaitGone of two live sleeps: %v, %v; want false, nil", ok, err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Errorf("WaitGone of two live sleeps returned after %v, before its 200ms", d)
	}
	t0 = time.Now() // before the kills' clock starts
	go func() {
		time.Sleep(100 * time.Millisecond)
		proc.Signal(sleeps[0], unix.SIGKILL)
		time.Sleep(100 * time.Millisecond)
		proc.Signal(sleeps[1], unix.SIGKILL)
	}()
	if ok, err := proc.WaitGone(sleeps, 10*time.Second); !ok || err != nil {
		t.Fatalf("WaitGone of two killed sleeps: %v, %v; want true, nil", ok, err)
	}
	if d := time.Since(t0); d < 200*time.Millisecond || d > 5*time.Second {
		t.Errorf("WaitGone returned %v after the first kill; want once the second was killed, 100ms after", d)
	}
	if err := recv(t, done); err != nil {
		t.Errorf("shell: %v; want its wait's 0", err)
	}
	if ok, err := proc.WaitGone(sleeps, time.Second); !ok || err != nil {
		t.Errorf("WaitGone of reaped pids: %v, %v; want true, nil", ok, err)
	}
}
