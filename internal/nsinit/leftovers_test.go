//go:build linux

package nsinit_test

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// escapees leaves three processes behind and exits 0: a setsid double
// fork, a setsid'd shell, and a plain background sleep.
const escapees = `(setsid sleep 600 &); setsid sh -c 'sleep 600' & sleep 600 & echo ready`

// forkLoop is testutil.ForkLoop (a process that forks and exits again and
// again, ignoring SIGTERM, for 6 s at most) in a session of its own and in
// the background, and the file it beats.
func forkLoop(t *testing.T) (cmd, beat string) {
	t.Helper()
	cmd, beat = testutil.ForkLoop(t)
	return "setsid " + cmd + " & ", beat
}

// TestKillLeftoversEscapees: what a command left running after a normal
// exit stays alive (a model may start a server on purpose) until
// KillLeftovers, which ends it all, escapees included.
func TestKillLeftoversEscapees(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ch, stdout, _ := spawn(t, in, marker, escapees)
	if ws := wait(t, ch); ws.ExitStatus() != 0 {
		t.Fatalf("status %v", ws)
	}
	testutil.WaitFor(t, 10*time.Second, "three sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
	time.Sleep(50 * time.Millisecond)
	if n := len(testutil.Processes(marker)); n < 3 {
		t.Fatalf("%d processes left after the exit; want the three sleeps alive", n)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	if left := testutil.Processes(marker); len(left) != 0 {
		t.Errorf("KillLeftovers returned with %d processes alive", len(left))
	}
	stdout.text(t)
	ch.Release()
}

// TestLeftoversAfterKillAll: once a KillLeftovers emptied the command's
// cgroup, nothing of the command is alive to start more, so its count is
// 0 and a second kill has nothing to do, both answered without the init:
// they hold even once the init is closed (a burst of task_kill then saves
// a round trip and a scan of /proc per task). Before the kill, the count
// asks the init; without a cgroup it always does (TestLeftoversAskInit).
func TestLeftoversAfterKillAll(t *testing.T) {
	marker := clean(t)
	in, _ := cgroupInit(t)
	ch, stdout, _ := spawn(t, in, marker, escapees)
	wait(t, ch)
	testutil.WaitFor(t, 10*time.Second, "three sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
	if n, err := ch.Leftovers(); n < 3 || err != nil {
		t.Fatalf("Leftovers before the kill: %d, %v; want the three sleeps", n, err)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	stdout.text(t)
	ch.Release()
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := ch.Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers after the kill, the init closed: %d, %v; want 0, nil", n, err)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Errorf("KillLeftovers again, the init closed: %v", err)
	}
	testutil.AssertNoProcesses(t, marker)
}

// TestKillLeftoversAfterRelease: leftovers stay charged to their command
// after its zombie was reaped, for KillLeftovers and for Stop.
func TestKillLeftoversAfterRelease(t *testing.T) {
	for _, k := range []struct {
		name string
		kill func(*nsinit.Child) error
	}{
		{"KillLeftovers", (*nsinit.Child).KillLeftovers},
		{"Stop", func(ch *nsinit.Child) error { return ch.Stop(time.Second) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			marker := clean(t)
			in := startInit(t)
			ch, stdout, _ := spawn(t, in, marker, escapees)
			wait(t, ch)
			testutil.WaitFor(t, 10*time.Second, "three sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
			ch.Release()
			// Another command runs meanwhile, and must survive.
			other := testutil.Marker(t)
			och, ostdout, _ := spawn(t, in, other, "sleep 600")
			// Seen running first: between fork and exec it does not carry
			// its marker yet, and would pass for dead.
			testutil.WaitFor(t, 10*time.Second, "the other command's sleep", func() bool { return len(testutil.Processes(other)) == 1 })
			if err := k.kill(ch); err != nil {
				t.Fatal(err)
			}
			if left := testutil.Processes(marker); len(left) != 0 {
				t.Errorf("%s after Release left %d processes", k.name, len(left))
			}
			if n := len(testutil.Processes(other)); n != 1 {
				t.Errorf("the other command: %d processes, want its sleep alive", n)
			}
			och.Terminate(time.Second)
			wait(t, och)
			och.Release()
			stdout.text(t)
			ostdout.text(t)
			testutil.AssertNoProcesses(t, other)
		})
	}
}

// TestKillLeftoversForkLoop: a fork-and-exit loop that ignores SIGTERM
// and left the session is ended by KillLeftovers.
func TestKillLeftoversForkLoop(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	loop, beat := forkLoop(t)
	ch, stdout, _ := spawn(t, in, marker, loop+"echo ready")
	wait(t, ch)
	testutil.WaitBeating(t, beat)
	t0 := time.Now()
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	t.Logf("KillLeftovers took %v", time.Since(t0))
	if testutil.Beating(t, beat) {
		t.Error("KillLeftovers returned with the loop alive")
	}
	stdout.text(t)
	ch.Release()
}

// TestCloseKillsEverything: Close ends every command and everything they
// left, and returns once they are gone.
func TestCloseKillsEverything(t *testing.T) {
	marker := clean(t)
	in, err := nsinit.Start(initOptions())
	if err != nil {
		t.Fatal(err)
	}
	ch1, out1, _ := spawn(t, in, marker, escapees)
	if ws := wait(t, ch1); ws.ExitStatus() != 0 {
		t.Fatalf("status %v", ws)
	}
	loop, beat := forkLoop(t)
	ch2, out2, _ := spawn(t, in, marker, loop+"sleep 600")
	testutil.WaitBeating(t, beat)
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if testutil.Beating(t, beat) {
		t.Error("Close returned with the loop alive")
	}
	if ws, err := ch1.Wait(); err != nil || ws.ExitStatus() != 0 {
		t.Errorf("Wait after Close, for a command that had exited 0 before: %v, %v", ws, err)
	}
	if _, err := ch2.Wait(); err != nsinit.ErrClosed {
		t.Errorf("Wait after Close, for a command that was running: %v, want ErrClosed", err)
	}
	if _, err := in.Spawn(nsinitCommand(marker, "true", nil, nil, nil)); err == nil {
		t.Error("Spawn after Close: no error")
	}
	out1.text(t)
	out2.text(t)
}

// TestLeftoversCount: Leftovers counts what a command left after its
// exit, escapees included, before and after Release, and 0 once
// KillLeftovers took them; a fork loop that left the session counts as
// one at least, though no scan may see it alive.
func TestLeftoversCount(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ch, stdout, _ := spawn(t, in, marker, escapees)
	wait(t, ch)
	testutil.WaitFor(t, 10*time.Second, "three sleeps and an sh", func() bool { return len(testutil.Processes(marker)) >= 4 })
	// The three sleeps and the setsid'd sh (dash runs its command as a
	// child).
	if n, err := ch.Leftovers(); n != 4 || err != nil {
		t.Errorf("Leftovers before Release: %d, %v; want 4", n, err)
	}
	ch.Release()
	if n, err := ch.Leftovers(); n != 4 || err != nil {
		t.Errorf("Leftovers after Release: %d, %v; want 4", n, err)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	if n, err := ch.Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers after KillLeftovers: %d, %v; want 0", n, err)
	}
	stdout.text(t)

	loop, beat := forkLoop(t)
	ch, stdout, _ = spawn(t, in, marker, loop+"echo ready")
	wait(t, ch)
	ch.Release()
	testutil.WaitBeating(t, beat)
	if n, err := ch.Leftovers(); n < 1 || err != nil {
		t.Errorf("Leftovers of a fork loop: %d, %v; want at least 1", n, err)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	if testutil.Beating(t, beat) {
		t.Error("KillLeftovers returned with the loop alive")
	}
	stdout.text(t)
}

// TestLeftoversAskInit: without a cgroup, a count after a successful
// KillLeftovers still asks the init, whose scans may have missed a fast
// fork loop that its count finds by the zombies it leaves: after the
// init is closed, the count fails instead of saying 0.
func TestLeftoversAskInit(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ch, stdout, _ := spawn(t, in, marker, "sleep 600 & echo ready")
	wait(t, ch)
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	stdout.text(t)
	ch.Release()
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := ch.Leftovers(); err == nil {
		t.Errorf("Leftovers without a cgroup, the init closed: %d, nil; want the init's error", n)
	}
}

// TestNonDumpableDuringStart: inits start while other code makes the
// process non-dumpable again and again (as local.New does for each
// executor a server makes). A server that is not root must be dumpable
// while it writes a new init's uid and gid maps; before proc.StartCmd
// ordered the two, one such start in a few failed with `fork/exec
// /proc/self/exe: permission denied`. Meaningful as an unprivileged user
// (TestUnprivileged runs it so); root writes the maps either way.
func TestNonDumpableDuringStart(t *testing.T) {
	clean(t)
	if err := proc.NonDumpable(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := proc.NonDumpable(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var starts sync.WaitGroup
	for range 4 {
		starts.Go(func() {
			for range 5 {
				in, err := nsinit.Start(initOptions())
				if err != nil {
					t.Errorf("Start while the process is made non-dumpable: %v", err)
					return
				}
				in.Close()
			}
		})
	}
	starts.Wait()
	close(stop)
	flips.Wait()
}

// TestStop: Stop is the executor's kill in one request: the group gets
// SIGTERM and the grace (a trap runs, nothing is SIGKILLed that ended by
// then), then everything the command left outside it is killed, and Stop
// returns once all is gone. A group that ignores SIGTERM is SIGKILLed
// after the grace, not before. After Release it takes the leftovers
// alone (TestKillLeftoversAfterRelease).
func TestStop(t *testing.T) {
	const grace = 400 * time.Millisecond
	t.Run("graceful", func(t *testing.T) {
		marker := clean(t)
		in := startInit(t)
		// Stopped once its echo ran (the trap's line follows it).
		ready := filepath.Join(t.TempDir(), "ready")
		ch, stdout, _ := spawn(t, in, marker, `trap 'echo got-term; exit 3' TERM; (setsid sleep 600 &); sleep 600 & echo ready; : > `+ready+`; wait`)
		testutil.WaitFor(t, 10*time.Second, "the echo", func() bool { _, err := os.Stat(ready); return err == nil })
		testutil.WaitFor(t, 10*time.Second, "the shell and its sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
		t0 := time.Now()
		if err := ch.Stop(grace); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d >= grace {
			t.Errorf("Stop took %v; the group ended on SIGTERM, within the grace %v", d, grace)
		}
		if left := testutil.Processes(marker); len(left) != 0 {
			t.Errorf("Stop returned with %d processes alive", len(left))
		}
		if ws := wait(t, ch); ws.ExitStatus() != 3 {
			t.Errorf("status %v; want the trap's exit 3", ws)
		}
		ch.Release()
		if got := stdout.text(t); got != "ready\ngot-term\n" {
			t.Errorf("output %q; want the trap's line after ready", got)
		}
	})
	t.Run("ignoring TERM", func(t *testing.T) {
		marker := clean(t)
		in := startInit(t)
		ch, stdout, _ := spawn(t, in, marker, `trap "" TERM; (setsid sleep 600 &); sleep 600 & echo ready; wait`)
		testutil.WaitFor(t, 10*time.Second, "three sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
		t0 := time.Now()
		if err := ch.Stop(grace); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d < grace {
			t.Errorf("Stop took %v; want SIGKILL after the grace %v", d, grace)
		}
		if left := testutil.Processes(marker); len(left) != 0 {
			t.Errorf("Stop returned with %d processes alive", len(left))
		}
		if ws := wait(t, ch); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("status %v, want SIGKILL", ws)
		}
		ch.Release()
		stdout.text(t)
	})
	t.Run("cgroup", func(t *testing.T) {
		// Terminate, the cgroup's kill and the ledger's sweep: the
		// count is settled as KillLeftovers's (TestLeftoversAfterKillAll).
		marker := clean(t)
		in, _ := cgroupInit(t)
		ch, stdout, _ := spawn(t, in, marker, escapees)
		testutil.WaitFor(t, 10*time.Second, "three sleeps", func() bool { return len(testutil.Processes(marker)) >= 3 })
		if err := ch.Stop(grace); err != nil {
			t.Fatal(err)
		}
		if left := testutil.Processes(marker); len(left) != 0 {
			t.Errorf("Stop returned with %d processes alive", len(left))
		}
		wait(t, ch)
		ch.Release()
		stdout.text(t)
		if err := in.Close(); err != nil {
			t.Fatal(err)
		}
		if n, err := ch.Leftovers(); n != 0 || err != nil {
			t.Errorf("Leftovers after Stop, the init closed: %d, %v; want 0, nil", n, err)
		}
	})
}
