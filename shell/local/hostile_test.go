//go:build linux

package local_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
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
	if _, err := ex.Run(context.Background(), spec); err != nil {
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
	if !testutil.Beating(t, beat) {
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

// burnCPU keeps n goroutines spinning until the test ends, to starve the
// goroutines that read the pipes.
func burnCPU(t *testing.T, n int) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for x := 0; !stop.Load(); x++ {
				if x%1024 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
}

// With a 1 ms grace the drain after the shell's exit is cut almost every
// time on a starved machine; no byte written before the exit may be lost.
func TestNoByteLostWhenTheDrainIsCut(t *testing.T) {
	runs, parallel := 200, 16
	if testing.Short() {
		runs = 64
	}
	if n, err := strconv.Atoi(os.Getenv("CONCHTEST_SOAK_RUNS")); err == nil && n > 0 {
		runs = n // a longer soak, e.g. 5000
	}
	ex, _ := newExec(t, &local.Options{Grace: time.Millisecond})
	burnCPU(t, 2*runtime.NumCPU())
	spec, err := ex.Resolve(shell.Request{Command: "seq 1 3000; echo FINAL-LINE"})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := 1; i <= 3000; i++ {
		want += strconv.Itoa(i) + "\n"
	}
	want += "FINAL-LINE\n"
	start := time.Now()
	var lost, leftRunning atomic.Int32
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r, err := ex.Run(context.Background(), spec)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Stdout.Text != want {
				if lost.Add(1) <= 3 {
					t.Errorf("run lost bytes: %d of %d, ends %q", len(r.Stdout.Text), len(want), r.Stdout.Text[max(0, len(r.Stdout.Text)-20):])
				}
			}
			if r.LeftRunning {
				leftRunning.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d runs, %d at a time, grace 1ms, %d CPU burners: %v; %d of them lost bytes", runs, parallel, 2*runtime.NumCPU(), time.Since(start), lost.Load())
	if n := leftRunning.Load(); n > 0 {
		t.Errorf("%d runs report a process left running; none was", n)
	}
}

// LeftRunning says when the drain was cut because a process the command
// started still holds its output, and only then.
func TestLeftRunning(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 200 * time.Millisecond})
	for _, tc := range []struct {
		command string
		want    bool
	}{
		{"sleep 600 & echo ok", true},
		{"sleep 600 >&2 & echo ok", true},
		{"echo ok", false},
		{"sleep 600 >/dev/null 2>&1 & echo ok", false},
		{"(sleep 0.05; echo late) & echo ok", false},
	} {
		r := run(t, ex, shell.Request{Command: tc.command})
		if r.LeftRunning != tc.want || code(r) != 0 {
			t.Errorf("%q: LeftRunning = %v, exit %d; want %v, 0", tc.command, r.LeftRunning, code(r), tc.want)
		}
	}
}
