//go:build linux

package nsinit_test

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestSpare: an init started ahead (StartSpare) becomes the init Start
// finishes: the same process, pid 1 of its namespace, running commands;
// a spare that died (even one whose death its reaper has not reported
// yet), or was cloned without the network namespace the options need, is
// replaced by a fresh start (and the unfit one ended);
// Close ends a spare no Start took.
func TestSpare(t *testing.T) {
	marker := clean(t)
	gone := func(pid int) bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return errors.Is(err, os.ErrNotExist)
	}
	startWith := func(o *nsinit.Options, sp *nsinit.Spare) *nsinit.Init {
		t.Helper()
		o.Spare = sp
		in, err := nsinit.Start(o)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		t.Cleanup(func() { in.Close() })
		if ws, stdout, stderr := run(t, in, marker, `echo "$$ $(cat /proc/1/comm)"`); ws.ExitStatus() != 0 || stdout == "" {
			t.Errorf("a command in the init: %v, %q, %q", ws, stdout, stderr)
		}
		return in
	}

	sp, err := nsinit.StartSpare(initOptions())
	if err != nil {
		t.Fatal(err)
	}
	if in := startWith(initOptions(), sp); in.Pid() != sp.Pid() {
		t.Errorf("the init is pid %d, not the spare's %d", in.Pid(), sp.Pid())
	}

	dead, err := nsinit.StartSpare(initOptions())
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(dead.Pid(), syscall.SIGKILL)
	testutil.WaitFor(t, 10*time.Second, "the killed spare reaped", func() bool { return gone(dead.Pid()) })
	if in := startWith(initOptions(), dead); in.Pid() == dead.Pid() {
		t.Error("a dead spare was taken")
	}

	// Dead, but not yet known to be: it cannot take its policy, and a
	// fresh init takes its place.
	late, err := nsinit.StartSpare(initOptions())
	if err != nil {
		t.Fatal(err)
	}
	late.DelayExited(2 * time.Second)
	syscall.Kill(late.Pid(), syscall.SIGKILL)
	testutil.WaitFor(t, 10*time.Second, "the killed spare reaped", func() bool { return gone(late.Pid()) })
	if in := startWith(initOptions(), late); in.Pid() == late.Pid() {
		t.Error("a dead spare was taken")
	}

	// Cloned with a network namespace of its own, for options without.
	o := initOptions()
	o.Sandbox = &sandbox.Plan{Mode: sandbox.FullAccess, Network: sandbox.NetworkOff}
	unfit, err := nsinit.StartSpare(o)
	if err != nil {
		t.Fatal(err)
	}
	if in := startWith(initOptions(), unfit); in.Pid() == unfit.Pid() {
		t.Error("a spare with a network namespace was taken for options without one")
	}
	if !gone(unfit.Pid()) {
		t.Error("the unfit spare was left running")
	}

	idle, err := nsinit.StartSpare(initOptions())
	if err != nil {
		t.Fatal(err)
	}
	idle.Close()
	if !gone(idle.Pid()) {
		t.Error("a closed spare's process is still there")
	}
}
