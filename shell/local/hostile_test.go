//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// A fork loop outlives its shell's timeout kill unless the group gets its
// SIGKILL without proof of life.
func TestForkLoopDiesWithTimeout(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	loop, beat := testutil.ForkLoop(t)
	r := run(t, ex, shell.Request{Command: loop + " & sleep 600", Timeout: 500 * time.Millisecond})
	if !r.TimedOut {
		t.Errorf("result %+v, want a timeout", r)
	}
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived the timeout")
	}
}

func TestForkLoopDiesWithKill(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	loop, beat := testutil.ForkLoop(t)
	p := start(t, ex, shell.Request{Command: loop + " & sleep 600"})
	testutil.WaitBeating(t, beat)
	p.Kill()
	waitDone(t, p, 5*time.Second)
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived Kill")
	}
}

// A fork loop left running by a normal exit dies when the executor closes.
func TestForkLoopDiesWithClose(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	loop, beat := testutil.ForkLoop(t)
	spec, err := ex.Resolve(shell.Request{Command: loop + " &"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shell.Run(context.Background(), ex, spec); err != nil {
		t.Fatal(err)
	}
	testutil.WaitBeating(t, beat)
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived Close")
	}
}

// sleeps returns the live processes carrying marker whose command line is
// "sleep <arg>".
func sleeps(marker, arg string) []proc.Info {
	var out []proc.Info
	for _, p := range testutil.Processes(marker) {
		if testutil.Cmdline(p.Pid) == "sleep "+arg {
			out = append(out, p)
		}
	}
	return out
}

func waitSleeps(t *testing.T, marker string, args ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, a := range args {
		for len(sleeps(marker, a)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("sleep %s did not start", a)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Kill of a background task takes what it started outside its group too:
// a setsid escapee whose parent still runs, and one whose parent exited
// (a double fork) and that was re-parented to the server.
func TestEscapeesOfTaskDieWithKill(t *testing.T) {
	ex, marker := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "setsid sleep 1000 & ( ( setsid sleep 1001 & ) & ); sleep 1002"})
	waitSleeps(t, marker, "1000", "1001", "1002")
	if !p.Kill() {
		t.Fatal("Kill = false")
	}
	waitDone(t, p, 5*time.Second)
	assertGone(t, marker)
}

// Kill takes what the command starts outside its group while its group
// dies: an escapee made by a SIGTERM trap after the kill began, when the
// kill of what it left before runs alongside the group's (docs/executor.md#killing).
func TestEscapeeMadeWhileDyingDiesWithKill(t *testing.T) {
	ex, marker := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "setsid sleep 1000 & trap 'sleep 0.3; setsid sleep 1001 & exit' TERM; sleep 1002 & wait"})
	waitSleeps(t, marker, "1000", "1002")
	if !p.Kill() {
		t.Fatal("Kill = false")
	}
	waitDone(t, p, 5*time.Second)
	assertGone(t, marker)
}

// EndOwner signals a running command once, as Kill does: a SIGTERM trap
// runs once, not once for the command's stop and again for the owner's
// sweep of its sessions.
func TestEndOwnerSignalsOnce(t *testing.T) {
	ex, marker := newExec(t, nil)
	f := filepath.Join(t.TempDir(), "traps")
	p := start(t, ex, shell.Request{Owner: "a", Command: "trap 'echo T >> " + f + "' TERM; sleep 1000 & wait; sleep 1001 & wait"})
	waitSleeps(t, marker, "1000")
	ex.EndOwner("a")
	waitDone(t, p, 5*time.Second)
	if b, _ := os.ReadFile(f); string(b) != "T\n" {
		t.Errorf("the trap ran %q, want once", b)
	}
	assertGone(t, marker)
}

// EndOwner takes what its owner's foreground commands left running,
// escapees included, and nothing of another owner's.
func TestEndOwnerTakesOnlyItsOwn(t *testing.T) {
	ex, marker := newExec(t, nil)
	quiet := " >/dev/null 2>&1"
	// The shell waits for the subshells of the double fork, so that
	// sleep 1011 starts before the shell exits: a background subshell
	// (`( ( … & ) & )`) may fork it after the exit, and an escapee that
	// starts after its command ended is nobody's.
	run(t, ex, shell.Request{Owner: "a", Command: "setsid sleep 1010" + quiet + " & ( ( setsid sleep 1011" + quiet + " & ) ); sleep 1012" + quiet + " &"})
	// Commands of two owners that overlap make an escapee's owner
	// unknowable from its start time; these do not.
	time.Sleep(50 * time.Millisecond)
	run(t, ex, shell.Request{Owner: "b", Command: "setsid sleep 1020" + quiet + " & sleep 1021" + quiet + " &"})
	bg := start(t, ex, shell.Request{Owner: "b", Command: "sleep 1022"})
	waitSleeps(t, marker, "1010", "1011", "1012", "1020", "1021", "1022")

	ex.EndOwner("b")
	waitDone(t, bg, time.Second)
	if bg.Status() != shell.StatusKilled {
		t.Errorf("b's running task: status %s, want killed", bg.Status())
	}
	for _, a := range []string{"1020", "1021", "1022"} {
		if n := len(sleeps(marker, a)); n != 0 {
			t.Errorf("sleep %s of b survived EndOwner(b)", a)
		}
	}
	for _, a := range []string{"1010", "1011", "1012"} {
		if n := len(sleeps(marker, a)); n != 1 {
			t.Errorf("sleep %s of a: %d alive after EndOwner(b), want 1", a, n)
		}
	}
	ex.EndOwner("a")
	assertGone(t, marker)
}

// A fork loop left running by a foreground command dies with its owner,
// not with another owner.
func TestForkLoopDiesWithEndOwner(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	loop, beat := testutil.ForkLoop(t)
	run(t, ex, shell.Request{Owner: "a", Command: loop + " >/dev/null 2>&1 &"})
	testutil.WaitBeating(t, beat)
	ex.EndOwner("b")
	if !testutil.StillBeating(t, beat) {
		t.Error("EndOwner(b) stopped a's fork loop")
	}
	ex.EndOwner("a")
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived EndOwner(a)")
	}
}

// A fork loop that left its session once (setsid) is seen only through
// the zombies it leaves; Kill of its task takes it all the same.
func TestSetsidForkLoopDiesWithKill(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	loop, beat := testutil.ForkLoop(t)
	p := start(t, ex, shell.Request{Command: "setsid " + loop + " & sleep 600"})
	testutil.WaitBeating(t, beat)
	p.Kill()
	waitDone(t, p, 5*time.Second)
	if testutil.Beating(t, beat) {
		t.Error("the setsid fork loop survived Kill")
	}
}
