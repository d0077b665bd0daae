//go:build linux

package proc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

func TestGroupAlive(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "sleep 600; :")
	pgid := cmd.Process.Pid
	done := waitAsync(cmd)
	testutil.WaitFor(t, 5*time.Second, "sleep to start", func() bool { return len(withCmdline(marker, "sleep 600")) == 1 })
	if !proc.GroupAlive(pgid) {
		t.Error("GroupAlive of a running group = false")
	}
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, done); !signalled(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed", err)
	}
	testutil.WaitFor(t, 5*time.Second, "group to go", func() bool { return !proc.GroupAlive(pgid) })
	for _, pgid := range []int{0, -1, -pgid} {
		if proc.GroupAlive(pgid) {
			t.Errorf("GroupAlive(%d) = true", pgid)
		}
	}
}

// TestGroupAliveWalk: once the leader of a command's session is our
// zombie (held unreaped, as during a kill), GroupAlive answers from our
// descendants, without a scan of /proc: a member re-parented to us keeps
// the group alive, and so does a member whose parent left the session
// with setsid (that parent, not the member, was re-parented to us); once
// both are gone, so is the group.
func TestGroupAliveWalk(t *testing.T) {
	marker := clean(t)
	// setsid execs in place: the subshell is not a group leader.
	cmd := startSession(t, marker, "sleep 600 & ( sleep 601 & exec setsid sleep 602 ) & exit 0")
	leader := cmd.Process.Pid
	waited := false
	t.Cleanup(func() {
		if !waited { // a failure below: the claimed leader is reaped all the same
			unix.Kill(-leader, unix.SIGKILL)
			proc.WaitCmd(cmd)
		}
	})
	var member, below, parent proc.Info
	testutil.WaitFor(t, 5*time.Second, "the leader to exit and the three sleeps", func() bool {
		// The leader first: its children are re-parented before it
		// shows as a zombie, so the sleeps read after it show their new
		// parents (read before, a member could still show the leader).
		if l, err := proc.Stat(leader); err != nil || l.State != 'Z' {
			return false
		}
		a, b, c := withCmdline(marker, "sleep 600"), withCmdline(marker, "sleep 601"), withCmdline(marker, "sleep 602")
		if len(a) != 1 || len(b) != 1 || len(c) != 1 || c[0].Sid != c[0].Pid {
			return false
		}
		member, below, parent = a[0], b[0], c[0]
		return true
	})
	if member.Pgid != leader || member.PPid != os.Getpid() || below.Pgid != leader || below.PPid != parent.Pid || parent.PPid != os.Getpid() {
		t.Fatalf("member %+v, below %+v, its parent %+v: want the first two in group %d, the first and the last re-parented to us (%d)",
			member, below, parent, leader, os.Getpid())
	}
	before := proc.GroupScans()
	gone := func(p proc.Info) {
		t.Helper()
		if err := proc.Signal(p, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 5*time.Second, "the sleep to die", func() bool { q, err := proc.Stat(p.Pid); return err != nil || !q.Alive() })
	}
	if !proc.GroupAlive(leader) {
		t.Error("GroupAlive = false with a member re-parented to us")
	}
	gone(member)
	if !proc.GroupAlive(leader) {
		t.Error("GroupAlive = false with a member whose parent left the session")
	}
	gone(below)
	if proc.GroupAlive(leader) {
		t.Error("GroupAlive = true once every member is gone")
	}
	if n := proc.GroupScans() - before; n != 0 {
		t.Errorf("GroupAlive scanned /proc %d times, want none", n)
	}
	gone(parent)
	waited = true
	if err := proc.WaitCmd(cmd); exitCode(err) != 0 {
		t.Errorf("Wait = %v, want exit 0", err)
	}
}

// TestGroupAliveZombieOnly builds a group in which every member is a
// zombie that the kernel still knows (kill(-pgid, 0) succeeds), so only
// a look at the processes can tell that it is gone.
func TestGroupAliveZombieOnly(t *testing.T) {
	marker := clean(t)
	// The leader becomes a sleep that never waits for its child, so a
	// killed child stays a zombie while the leader lives.
	cmd := startSession(t, marker, "sleep 600 & exec sleep 601")
	leader := cmd.Process.Pid
	var child proc.Info
	testutil.WaitFor(t, 5*time.Second, "both sleeps", func() bool {
		c := withCmdline(marker, "sleep 600")
		if len(c) == 1 && len(withCmdline(marker, "sleep 601")) == 1 {
			child = c[0]
			return true
		}
		return false
	})
	if child.Pgid != leader || child.PPid != leader {
		t.Fatalf("child %+v: want pgid and ppid %d", child, leader)
	}
	if err := proc.Signal(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "child zombie", func() bool { p, err := proc.Stat(child.Pid); return err == nil && p.State == 'Z' })
	if !proc.GroupAlive(leader) {
		t.Error("GroupAlive = false with the leader alive and its child a zombie")
	}

	// Kill the leader but do not reap it yet (it is claimed, so the
	// orphan reaper leaves it): the group is a zombie leader, plus the
	// zombie child until the orphan reaper takes it from the subreaper.
	if err := unix.Kill(leader, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "leader zombie", func() bool { p, err := proc.Stat(leader); return err == nil && p.State == 'Z' })
	if err := unix.Kill(-leader, 0); err != nil {
		t.Fatalf("kill(-pgid, 0) = %v; the scenario needs the kernel to still know the group", err)
	}
	if proc.GroupAlive(leader) {
		t.Error("GroupAlive = true for a group of zombies")
	}
	start := time.Now()
	if proc.Terminate(leader, time.Second) {
		t.Error("Terminate of a zombie-only group escalated")
	}
	t.Logf("Terminate of a zombie-only group: %v", time.Since(start))

	// The orphaned zombie child was re-parented to us and is reaped by
	// the orphan reaper; the claimed leader is not.
	testutil.WaitFor(t, 5*time.Second, "orphan reaper to reap the child", func() bool {
		_, err := proc.Stat(child.Pid)
		return errors.Is(err, proc.ErrNotExist)
	})
	if p, err := proc.Stat(leader); err != nil || p.State != 'Z' {
		t.Errorf("claimed leader: %+v, %v; want a zombie still waiting for Wait", p, err)
	}
	if err := proc.WaitCmd(cmd); !signalled(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed", err)
	}
	if err := unix.Kill(-leader, 0); err != unix.ESRCH {
		t.Errorf("kill(-pgid, 0) after the reap = %v, want ESRCH", err)
	}
	if z := testutil.ZombieChildren(); slices.Contains(z, leader) || slices.Contains(z, child.Pid) {
		t.Errorf("zombie children left: %v", z)
	}
}

func TestTerminateCooperative(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"exec", "sleep 600"},              // bash execs sleep: a group of one
		{"bash and child", "sleep 600; :"}, // bash waits for its sleep
		{"background members", "sleep 600 & sleep 600 & wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var took, bare []time.Duration
			for range 5 {
				took = append(took, terminateOnce(t, tc.script, proc.Terminate))
				bare = append(bare, terminateOnce(t, tc.script, bareTerminate))
			}
			slices.Sort(took)
			slices.Sort(bare)
			t.Logf("Terminate latency over %d runs: min %v, median %v, max %v; a bare SIGTERM and watch: min %v, median %v",
				len(took), took[0], took[len(took)/2], took[len(took)-1], bare[0], bare[len(bare)/2])
			// The best run shows what Terminate costs: under 50 ms, or,
			// on a machine so loaded that the group's own exit takes
			// longer, under twice what the same group took to go with a
			// bare SIGTERM and a watch of /proc every millisecond in the
			// same minutes (CI once: 54 ms, beside burners on a slow day).
			// The worst shows it never sat out the grace (3 s).
			if took[0] >= 50*time.Millisecond && took[0] >= 2*bare[0] {
				t.Errorf("fastest Terminate took %v, want < 50ms or < twice the bare %v", took[0], bare[0])
			}
			if worst := took[len(took)-1]; worst >= time.Second {
				t.Errorf("slowest Terminate took %v: it waited for the grace", worst)
			}
		})
	}
}

// bareTerminate is the baseline of Terminate's cost: SIGTERM to the
// group, then a look at /proc every millisecond until no member lives.
// After grace it gives up (true, as an escalation would read), for the
// test to say so instead of hanging.
func bareTerminate(pgid int, grace time.Duration) bool {
	unix.Kill(-pgid, unix.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); {
		infos, err := proc.Scan()
		alive := err != nil
		for _, p := range infos {
			alive = alive || p.Pgid == pgid && p.Alive()
		}
		if !alive {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	unix.Kill(-pgid, unix.SIGKILL)
	return true
}

func terminateOnce(t *testing.T, script string, terminate func(int, time.Duration) bool) time.Duration {
	t.Helper()
	marker := clean(t)
	cmd := startSession(t, marker, script)
	done := waitAsync(cmd)
	// The group whole before the kill: every sleep started and the
	// leader asleep (bash in its wait, or the exec'd sleep). A shell
	// killed in the middle of a fork holds SIGTERM blocked until the fork
	// returns, and beside CPU burners the kernel was seen to leave such a
	// shell runnable but unscheduled for 1-3 s: the kernel's time, not
	// Terminate's, which this test measures.
	sleeps := strings.Count(script, "sleep 600")
	testutil.WaitFor(t, 5*time.Second, "the group to form", func() bool {
		leader, err := proc.Stat(cmd.Process.Pid)
		return err == nil && leader.State == 'S' && len(withCmdline(marker, "sleep 600")) == sleeps
	})
	start := time.Now()
	escalated := terminate(cmd.Process.Pid, 3*time.Second)
	took := time.Since(start)
	if escalated {
		t.Errorf("Terminate(%q) escalated", script)
	}
	if err := recv(t, done); !signalled(err, syscall.SIGTERM) {
		t.Errorf("Wait = %v, want killed by SIGTERM", err)
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		t.Errorf("Terminate returned with %d live processes", len(left))
	}
	return took
}

func TestTerminateTrapped(t *testing.T) {
	marker := clean(t)
	// sleep inherits the ignored SIGTERM; both bash (when it does not
	// exec) and sleep ignore it.
	cmd := startSession(t, marker, "trap '' TERM; sleep 600 & sleep 600")
	done := waitAsync(cmd)
	testutil.WaitFor(t, 5*time.Second, "sleeps", func() bool { return len(withCmdline(marker, "sleep 600")) == 2 })
	const grace = 300 * time.Millisecond
	start := time.Now()
	escalated := proc.Terminate(cmd.Process.Pid, grace)
	took := time.Since(start)
	t.Logf("Terminate of a TERM-ignoring group with grace %v: %v", grace, took)
	if !escalated {
		t.Error("Terminate did not escalate")
	}
	if took < grace || took > grace+2*time.Second { // loose above: a loaded machine is slow to run the dying
		t.Errorf("Terminate took %v, want about grace (%v)", took, grace)
	}
	if err := recv(t, done); !signalled(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed by SIGKILL", err)
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		t.Errorf("Terminate returned with %d live processes", len(left))
	}
}

func TestTerminateContextHurries(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "trap '' TERM; sleep 600")
	done := waitAsync(cmd)
	testutil.WaitFor(t, 5*time.Second, "sleep", func() bool { return len(withCmdline(marker, "sleep 600")) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	escalated := proc.TerminateContext(ctx, cmd.Process.Pid, time.Minute)
	took := time.Since(start)
	t.Logf("hurried Terminate: %v", took)
	if !escalated || took > time.Second {
		t.Errorf("TerminateContext = %v after %v; want an escalation soon after ctx ended", escalated, took)
	}
	if err := recv(t, done); !signalled(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed by SIGKILL", err)
	}
}

func TestTerminateGoneOrForbidden(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "exit 0")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatal(err)
	}
	for _, pgid := range []int{cmd.Process.Pid, 0, 1, -5, unix.Getpgrp()} {
		start := time.Now()
		if proc.Terminate(pgid, time.Second) {
			t.Errorf("Terminate(%d) escalated", pgid)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("Terminate(%d) took %v, want an immediate return", pgid, took)
		}
	}
}

// BenchmarkGroupAlive measures one poll of Terminate: for a group whose
// leader runs (answered from the leader's stat), and for one whose leader
// is a zombie while a member runs (a /proc scan).
func BenchmarkGroupAlive(b *testing.B) {
	marker := testutil.Marker(b)
	defer testutil.AssertNoProcesses(b, marker)
	for _, bc := range []struct{ name, script string }{
		{"leader alive", "exec sleep 600"},
		{"leader zombie", "sleep 600 & exec sleep 601"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cmd := exec.Command("bash", "-c", bc.script)
			cmd.Env = testutil.Env(marker)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := proc.StartCmd(cmd); err != nil {
				b.Fatal(err)
			}
			pgid := cmd.Process.Pid
			defer func() {
				unix.Kill(-pgid, unix.SIGKILL)
				proc.WaitCmd(cmd)
			}()
			if bc.name == "leader zombie" {
				for len(withCmdline(marker, "sleep 600")) == 0 {
					time.Sleep(time.Millisecond)
				}
				unix.Kill(pgid, unix.SIGKILL)
				for p, _ := proc.Stat(pgid); p.State != 'Z'; p, _ = proc.Stat(pgid) {
					time.Sleep(time.Millisecond)
				}
			}
			for b.Loop() {
				if !proc.GroupAlive(pgid) {
					b.Fatal("group gone")
				}
			}
		})
	}
}
