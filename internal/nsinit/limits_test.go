//go:build linux

package nsinit_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestLimits: with MaxPids 20 a bounded fork bomb stops at the limit (the
// command's own process and the init's counted), the next command has
// its own 20; with MaxMemory 64 MiB a command that writes 512 MiB is
// killed. As root (the cgroup v1 controllers of this machine are root's);
// an ordinary user's Start names why it cannot (TestLimitsRefused).
func TestLimits(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pids and memory controllers are writable by root only here (TestLimitsRefused covers the rest)")
	}
	marker := clean(t)
	o := initOptions()
	o.MaxPids, o.MaxMemory = 20, 64<<20
	in, err := nsinit.Start(o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { in.Close() })
	for range 2 {
		ch, stdout, _ := spawn(t, in, marker, testutil.BoundedForks)
		wait(t, ch)
		out := stdout.text(t)
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || n >= 20 || n < 10 {
			t.Errorf("the bounded fork bomb made %q children, want fewer than 20 (and not far fewer)", out)
		}
		ch.KillLeftovers()
		ch.Release()
	}
	ws, out, errOut := run(t, in, marker, testutil.MemoryHog(512))
	if ws.Signal() != syscall.SIGKILL || strings.Contains(out, "survived") {
		t.Errorf("a 512 MiB write under a 64 MiB limit: %v, %q %q; want killed by SIGKILL", ws, out, errOut)
	}
	if ws, out, _ := run(t, in, marker, testutil.MemoryHog(16)); ws.ExitStatus() != 0 || out != "survived\n" {
		t.Errorf("a 16 MiB write under a 64 MiB limit: %v, %q", ws, out)
	}
}

// TestLimitsRefused: where no controller is writable (an ordinary user
// here), Start with a limit fails naming the cause. Run as uid 65534.
func TestLimitsRefused(t *testing.T) {
	if !testutil.AsUnprivileged(t) {
		return
	}
	o := initOptions()
	o.MaxPids = 20
	in, err := nsinit.Start(o)
	if err == nil {
		in.Close()
		t.Fatal("Start with MaxPids as an ordinary user succeeded; want the cause")
	}
	if !strings.HasPrefix(err.Error(), "nsinit: pids limit: cgroup v1 /sys/fs/cgroup/pids") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Start: %v; want the pids limit's cause", err)
	}
}
