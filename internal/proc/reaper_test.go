//go:build linux

package proc_test

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"unsafe"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

func TestBecomeSubreaperIsIdempotent(t *testing.T) {
	for range 3 {
		if err := proc.BecomeSubreaper(); err != nil {
			t.Fatal(err)
		}
	}
	var flag int32
	if _, _, e := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&flag)), 0, 0, 0, 0); e != 0 {
		t.Fatal(e)
	}
	if flag != 1 {
		t.Errorf("PR_GET_CHILD_SUBREAPER = %d, want 1", flag)
	}
}

// TestSubreaperAdoptsAndReapsEscapee: a process that left its session and
// whose shell exited is re-parented to us, and reaped by the orphan reaper
// once it dies.
func TestSubreaperAdoptsAndReapsEscapee(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "setsid sleep 1000 &")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatalf("bash: %v", err)
	}
	var esc proc.Info
	testutil.WaitFor(t, 5*time.Second, "the escapee", func() bool {
		s := withCmdline(marker, "sleep 1000")
		if len(s) == 1 {
			esc = s[0]
		}
		return len(s) == 1
	})
	if esc.PPid != os.Getpid() {
		t.Errorf("escapee %+v: ppid %d, want us (%d): not re-parented to the subreaper", esc, esc.PPid, os.Getpid())
	}
	if esc.Sid != esc.Pid || esc.Pgid != esc.Pid {
		t.Errorf("escapee %+v did not leave the session", esc)
	}
	if err := proc.Signal(esc, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testutil.WaitFor(t, 5*time.Second, "the orphan reaper to reap the escapee", func() bool {
		_, err := proc.Stat(esc.Pid)
		return errors.Is(err, proc.ErrNotExist)
	})
	t.Logf("escapee reaped %v after SIGKILL", time.Since(start))
	if z := testutil.ZombieChildren(); slices.Contains(z, esc.Pid) {
		t.Errorf("escapee left a zombie: %v", z)
	}
}

// TestReaperSparesWaitedChildren: the orphan reaper must never reap a
// child someone else waits for, or that Wait fails with ECHILD and loses
// the exit status. Plain exec.Command children (our own process group)
// and claimed children are both left as zombies for their Wait.
func TestReaperSparesWaitedChildren(t *testing.T) {
	marker := clean(t)

	plain := exec.Command("bash", "-c", "exit 3")
	plain.Env = testutil.Env(marker)
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	claimed := startSession(t, marker, "exit 4")

	for _, pid := range []int{plain.Process.Pid, claimed.Process.Pid} {
		testutil.WaitFor(t, 5*time.Second, "a zombie", func() bool { p, err := proc.Stat(pid); return err == nil && p.State == 'Z' })
	}
	// An orphan (re-parented to us, in a session of its own) makes the
	// reaper's rounds worth a scan (it skips them when nothing could be
	// its to reap).
	leader := startSession(t, marker, "setsid sleep 600 & exit 0")
	if err := proc.WaitCmd(leader); err != nil {
		t.Fatal(err)
	}
	var orphan proc.Info
	testutil.WaitFor(t, 5*time.Second, "the orphan", func() bool {
		o := withCmdline(marker, "sleep 600")
		if len(o) == 1 && o[0].PPid == os.Getpid() {
			orphan = o[0]
			return true
		}
		return false
	})
	defer func() {
		proc.Signal(orphan, syscall.SIGKILL)
		testutil.WaitFor(t, 5*time.Second, "the orphan to be reaped", func() bool {
			_, err := proc.Stat(orphan.Pid)
			return errors.Is(err, proc.ErrNotExist)
		})
	}()
	// Let the reaper see both zombies: one scan that starts after they
	// exist, plus its trailing scan.
	scans := proc.ReapScans()
	poke := exec.Command("true") // its exit raises SIGCHLD again
	if err := poke.Run(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the reaper to scan", func() bool { return proc.ReapScans() > scans })
	time.Sleep(3 * proc.ReapInterval)

	for _, pid := range []int{plain.Process.Pid, claimed.Process.Pid} {
		if p, err := proc.Stat(pid); err != nil || p.State != 'Z' {
			t.Errorf("pid %d: %+v, %v; want a zombie left for its Wait", pid, p, err)
		}
	}
	if err := plain.Wait(); exitCode(err) != 3 {
		t.Errorf("plain child: Wait = %v, want exit status 3", err)
	}
	if err := proc.WaitCmd(claimed); exitCode(err) != 4 {
		t.Errorf("claimed child: Wait = %v, want exit status 4", err)
	}
}

func TestReaperRateLimitsBursts(t *testing.T) {
	marker := clean(t)
	// 50 orphans exit at once; the reaper must reap them all with a
	// handful of scans, not one per SIGCHLD.
	cmd := startSession(t, marker, "for i in $(seq 50); do setsid sleep 0.2 & done")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	scans := proc.ReapScans()
	testutil.WaitFor(t, 5*time.Second, "every orphan to be reaped", func() bool {
		return len(testutil.Processes(marker)) == 0 && len(testutil.ZombieChildren()) == 0
	})
	time.Sleep(2 * proc.ReapInterval)
	n := proc.ReapScans() - scans
	t.Logf("50 orphan exits cost %d reaper scans", n)
	if n >= 25 { // one scan per exit would be 50
		t.Errorf("%d scans for one burst of 50 exits, want a few", n)
	}
}

func TestLockSpawnAllowsConcurrentSpawns(t *testing.T) {
	unlock1 := proc.LockSpawn()
	got := make(chan struct{})
	go func() {
		unlock2 := proc.LockSpawn()
		unlock2()
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Error("a second LockSpawn blocked behind the first")
	}
	unlock1()
	unlock1() // a second unlock is harmless
	testutil.VerifyNoLeaks(t)
}

// TestWaitExitedLeavesTheZombie: WaitExited returns the status once the
// child has exited and leaves it unreaped, so its pid and pgid stay held
// until Wait.
func TestWaitExitedLeavesTheZombie(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "sleep 0.1; exit 5")
	ws, err := proc.WaitExited(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Exited() || ws.ExitStatus() != 5 {
		t.Errorf("WaitExited status %#x, want exit status 5", ws)
	}
	if p, err := proc.Stat(cmd.Process.Pid); err != nil || p.State != 'Z' {
		t.Errorf("after WaitExited: %+v, %v; want an unreaped zombie", p, err)
	}
	if err := unix.Kill(-cmd.Process.Pid, 0); err != nil {
		t.Errorf("kill(-pgid, 0) = %v; the zombie leader must still hold the group", err)
	}
	if err := proc.WaitCmd(cmd); exitCode(err) != 5 {
		t.Errorf("Wait = %v, want exit status 5", err)
	}
	if _, err := proc.WaitExited(cmd.Process.Pid); err == nil {
		t.Error("WaitExited of a reaped child succeeded")
	}
}

// TestWaitExitedStatusOfASignal: a child killed by a signal is reported as
// wait4 would, with the signal (and the core flag when it dumped).
func TestWaitExitedStatusOfASignal(t *testing.T) {
	marker := clean(t)
	for _, tc := range []struct {
		cmd string
		sig syscall.Signal
	}{
		{"kill -TERM $$", syscall.SIGTERM},
		{"kill -KILL $$", syscall.SIGKILL},
		{"ulimit -c 0; kill -ABRT $$", syscall.SIGABRT},
	} {
		cmd := startSession(t, marker, tc.cmd)
		ws, err := proc.WaitExited(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if !ws.Signaled() || ws.Signal() != tc.sig {
			t.Errorf("%q: WaitExited status %#x, want the signal %v", tc.cmd, ws, tc.sig)
		}
		proc.WaitCmd(cmd)
	}
}
