//go:build linux

package proc_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestTrackerKillAll runs the ways a command leaves processes behind and
// checks that KillAll takes them all, and nothing else.
func TestTrackerKillAll(t *testing.T) {
	marker := clean(t)
	plainMarker := clean(t)
	otherMarker := clean(t)

	// Not ours to kill: a plain os/exec child of the test (our own group
	// and session), and a left-running member of another tracker.
	plain := exec.Command("sleep", "1000")
	plain.Env = testutil.Env(plainMarker)
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	other := proc.NewTracker()
	otherCmd := startSession(t, otherMarker, "sleep 1000 &")
	other.Add(otherCmd.Process.Pid, "")
	if err := proc.WaitCmd(otherCmd); err != nil {
		t.Fatal(err)
	}

	tr := proc.NewTracker()
	exited := []string{
		"sleep 1000 & echo left running",            // group member outliving a normal exit
		"setsid sleep 1000 &",                       // escapee: own session, re-parented to us
		"( ( sleep 1000 & ) & )",                    // double fork: keeps the session
		"nohup sleep 1000 >/dev/null 2>&1 & disown", // nohup and disown: keeps the session
		"(trap '' TERM; exec sleep 1000) &",         // ignores SIGTERM: needs SIGKILL
		"setsid bash -c 'sleep 1000 & wait' &",      // escapee with a child
	}
	running := []string{
		"sleep 1000 & wait",        // the shell itself still runs
		"setsid sleep 1000 & wait", // escapee whose parent still runs
	}
	for _, script := range exited {
		cmd := startSession(t, marker, script)
		tr.Add(cmd.Process.Pid, "")
		if err := proc.WaitCmd(cmd); err != nil {
			t.Fatalf("%q: %v", script, err)
		}
	}
	var dones []<-chan error
	for _, script := range running {
		cmd := startSession(t, marker, script)
		tr.Add(cmd.Process.Pid, "")
		dones = append(dones, waitAsync(cmd))
	}
	const sleeps = 8
	testutil.WaitFor(t, 5*time.Second, "every sleep", func() bool { return len(withCmdline(marker, "sleep 1000")) == sleeps })
	before := testutil.Processes(marker)
	for _, p := range before {
		t.Logf("before: pid %d ppid %d pgid %d sid %d: %s", p.Pid, p.PPid, p.Pgid, p.Sid, testutil.Cmdline(p.Pid))
	}

	const grace = 200 * time.Millisecond
	start := time.Now()
	tr.KillAll(grace)
	took := time.Since(start)
	t.Logf("KillAll of %d processes (one ignoring SIGTERM), grace %v: %v", len(before), grace, took)
	if took > grace+2*time.Second {
		t.Errorf("KillAll took %v, want about grace (%v)", took, grace)
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		for _, p := range left {
			t.Errorf("survived KillAll: pid %d ppid %d pgid %d sid %d: %s", p.Pid, p.PPid, p.Pgid, p.Sid, testutil.Cmdline(p.Pid))
		}
	}
	for _, done := range dones {
		if err := recv(t, done); !signalled(err, syscall.SIGTERM) {
			t.Errorf("running shell: Wait = %v, want killed by SIGTERM", err)
		}
	}
	if z := testutil.ZombieChildren(); len(z) > 0 {
		t.Errorf("zombie children after KillAll: %v", z)
	}

	if n := len(testutil.Processes(plainMarker)); n != 1 {
		t.Errorf("KillAll took the test's own plain child (%d left, want 1)", n)
	}
	if n := len(testutil.Processes(otherMarker)); n != 1 {
		t.Errorf("KillAll took another tracker's process (%d left, want 1)", n)
	}
	other.KillAll(grace)
	if n := len(testutil.Processes(otherMarker)); n != 0 {
		t.Errorf("the other tracker's KillAll left %d processes", n)
	}
	plain.Process.Kill()
	if err := plain.Wait(); !signalled(err, syscall.SIGKILL) {
		t.Errorf("plain child: Wait = %v, want killed (not ECHILD: nobody else may reap it)", err)
	}
}

func TestTrackerKillAllEmptyIsFast(t *testing.T) {
	clean(t)
	start := time.Now()
	proc.NewTracker().KillAll(time.Second)
	took := time.Since(start)
	t.Logf("KillAll with nothing to kill: %v", took)
	if took > 500*time.Millisecond { // the grace is 1 s: it must not wait for it
		t.Errorf("KillAll with nothing to kill took %v", took)
	}
}

// TestTrackerNothingToTakeNoScan: a tracker that tracks nothing ends an
// owner, and ends all while this process has no child, without a scan of
// /proc (a contained executor's, whose commands are its inits'); with a
// child of this process alive, KillAll scans (the child could be an
// adopted orphan), and still leaves a child that is not one alone.
func TestTrackerNothingToTakeNoScan(t *testing.T) {
	clean(t)
	// The premise: this process has no child. An earlier test's may
	// still be exiting on a loaded machine: its SIGCHLD sends the orphan
	// reaper to scan /proc for it (counted below), and KillAll rightly
	// scans while it is a zombie. A CI run beside two CPU burners once
	// counted one scan here.
	self := os.Getpid()
	logged := false
	testutil.WaitFor(t, 10*time.Second, "no child of this process", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", self, self))
		kids := strings.Fields(string(b))
		if len(kids) > 0 && !logged {
			logged = true
			for _, k := range kids {
				st, _ := os.ReadFile("/proc/" + k + "/stat")
				t.Logf("waiting for a child left by an earlier test: %s", st)
			}
		}
		return err == nil && len(kids) == 0
	})
	tr := proc.NewTracker()
	before := proc.Scans()
	tr.KillOwner("nobody", time.Second)
	tr.KillAll(time.Second)
	if n := proc.Scans() - before; n != 0 {
		t.Errorf("%d scans of /proc with nothing to take, want none", n)
	}
	child := exec.Command("sleep", "1000")
	if err := proc.StartCmd(child); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		proc.WaitCmd(child)
	}()
	before = proc.Scans()
	tr.KillAll(time.Second)
	if proc.Scans() == before {
		t.Error("KillAll did not scan while this process had a child")
	}
	if err := child.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("KillAll took a child it did not track: %v", err)
	}
}

// TestTrackerSessionMovesOnReAdd: a session id is a pid; when a new
// command of another tracker gets the number of an old, dead session, the
// old tracker must not kill it.
func TestTrackerSessionMovesOnReAdd(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "sleep 1000 & wait")
	done := waitAsync(cmd)
	testutil.WaitFor(t, 5*time.Second, "sleep", func() bool { return len(withCmdline(marker, "sleep 1000")) == 1 })
	old, cur := proc.NewTracker(), proc.NewTracker()
	old.Add(cmd.Process.Pid, "") // as if an earlier session had had this id
	cur.Add(cmd.Process.Pid, "") // the pid is handed to a new command
	old.KillAll(time.Second)
	if n := len(testutil.Processes(marker)); n != 2 {
		t.Errorf("the old tracker's KillAll left %d of 2 processes", n)
	}
	cur.KillAll(time.Second)
	if err := recv(t, done); !signalled(err, syscall.SIGTERM) {
		t.Errorf("Wait = %v, want killed by SIGTERM", err)
	}
}

func TestTrackerPrunesDeadSessions(t *testing.T) {
	marker := clean(t)
	tr := proc.NewTracker()
	live := startSession(t, marker, "sleep 1000 & wait")
	tr.Add(live.Process.Pid, "")
	done := waitAsync(live)
	// Ids above PID_MAX_LIMIT (2^22) never name a process: dead sessions.
	const dead = 3000
	for i := range dead {
		tr.Add(1<<22+1+i, "")
	}
	if n := proc.TrackedSessions(); n >= dead {
		t.Errorf("%d sessions tracked after %d dead ones were added, want them pruned", n, dead)
	} else {
		t.Logf("%d sessions tracked after %d dead ones were added", n, dead)
	}
	testutil.WaitFor(t, 5*time.Second, "sleep", func() bool { return len(withCmdline(marker, "sleep 1000")) == 1 })
	tr.KillAll(time.Second)
	if err := recv(t, done); !signalled(err, syscall.SIGTERM) {
		t.Errorf("Wait = %v, want killed by SIGTERM (a live session must survive pruning)", err)
	}
	if n := proc.TrackedSessions(); n != 0 {
		t.Errorf("%d sessions still tracked after KillAll", n)
	}
}

// A fork loop that a command left running is never seen by a scan; the
// zombies it leaves are, and KillAll signals its group through one.
func TestTrackerKillAllForkLoop(t *testing.T) {
	marker := clean(t)
	loop, beat := testutil.ForkLoop(t)
	cmd := startSession(t, marker, loop+" &")
	tr := proc.NewTracker()
	tr.Add(cmd.Process.Pid, "")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatal(err)
	}
	testutil.WaitBeating(t, beat)
	tr.KillAll(100 * time.Millisecond)
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived KillAll")
	}
	if z := testutil.ZombieChildren(); len(z) > 0 {
		t.Errorf("zombie children after KillAll: %v", z)
	}
}

// A fork loop that a command left running is never seen alive by a scan,
// but the zombies it leaves are: the prunes keep its session, so another
// tracker's KillAll does not take it for an escapee nobody owns, and its
// owner's KillOwner does.
func TestTrackerPruneKeepsForkLoop(t *testing.T) {
	marker := clean(t)
	loop, beat := testutil.ForkLoop(t)
	cmd := startSession(t, marker, loop+" &")
	tr := proc.NewTracker()
	tr.Add(cmd.Process.Pid, "a")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatal(err)
	}
	tr.Exited(cmd.Process.Pid)
	testutil.WaitBeating(t, beat)
	other := proc.NewTracker()
	for i := range 1000 { // dead sessions: two prunes run
		other.Add(1<<22+1+i, "c")
	}
	other.KillAll(100 * time.Millisecond)
	if !testutil.StillBeating(t, beat) {
		// Which of the two: the kill took it (the session was forgotten),
		// or the loop is alive and stopped touching its file.
		group := "has members"
		if err := unix.Kill(-cmd.Process.Pid, 0); err != nil {
			group = err.Error()
		}
		t.Errorf("the fork loop stopped after another tracker's KillAll: its session tracked %v, its group: %s",
			tr.Tracks(cmd.Process.Pid), group)
	}
	tr.KillOwner("a", 100*time.Millisecond)
	if testutil.Beating(t, beat) {
		t.Error("the fork loop survived KillOwner(a)")
	}
	tr.KillAll(100 * time.Millisecond)
}

// An escapee re-parented to us is attributed by its command's window;
// when the command's empty session is pruned, the escapee keeps its
// owner, and KillOwner takes it, and only it.
func TestTrackerKillOwnerAfterPrune(t *testing.T) {
	marker := clean(t)
	tr := proc.NewTracker()
	for owner, script := range map[string]string{"a": "setsid sleep 1001 &", "b": "setsid sleep 1002 &"} {
		cmd := startSession(t, marker, script)
		tr.Add(cmd.Process.Pid, owner)
		if err := proc.WaitCmd(cmd); err != nil {
			t.Fatal(err)
		}
		tr.Exited(cmd.Process.Pid)
		time.Sleep(50 * time.Millisecond) // the windows of a and b must not overlap
	}
	testutil.WaitFor(t, 5*time.Second, "both sleeps", func() bool {
		return len(withCmdline(marker, "sleep 1001")) == 1 && len(withCmdline(marker, "sleep 1002")) == 1
	})
	for i := range 3000 { // dead sessions: the prunes forget the commands' empty ones
		tr.Add(1<<22+1+i, "c")
	}
	tr.KillOwner("a", time.Second)
	if n := len(withCmdline(marker, "sleep 1001")); n != 0 {
		t.Error("KillOwner(a) left a's escapee")
	}
	if n := len(withCmdline(marker, "sleep 1002")); n != 1 {
		t.Error("KillOwner(a) took b's escapee")
	}
	tr.KillAll(time.Second)
}

// The window by which an escapee is attributed opens when the command's
// shell started, not when Add ran: a caller descheduled after the spawn
// (a loaded machine) adds the command after its shell forked the escapee.
func TestTrackerAttributesEscapeeForkedBeforeAdd(t *testing.T) {
	marker := clean(t)
	tr := proc.NewTracker()
	cmd := startSession(t, marker, "setsid sleep 1003 &")
	testutil.WaitFor(t, 5*time.Second, "the escapee", func() bool {
		return len(withCmdline(marker, "sleep 1003")) == 1
	})
	time.Sleep(50 * time.Millisecond) // five clock ticks: the caller was descheduled
	tr.Add(cmd.Process.Pid, "a")
	if err := proc.WaitCmd(cmd); err != nil {
		t.Fatal(err)
	}
	tr.Exited(cmd.Process.Pid)
	tr.KillOwner("a", time.Second)
	if n := len(withCmdline(marker, "sleep 1003")); n != 0 {
		t.Error("KillOwner(a) left a's escapee, forked before Add")
	}
	tr.KillAll(time.Second)
}

// scanFailHelperEnv makes the test binary scanFailHelper.
const scanFailHelperEnv = "PROC_TEST_SCAN_FAIL"

// scanFailHelper leaves a process running in a tracked command's session,
// then KillAlls while no descriptor can be opened (its limit set to 0)
// for 300 ms, and prints whether the process is "alive" or "gone" after.
func scanFailHelper() int {
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Println(err)
		return 1
	}
	tr := proc.NewTracker()
	cmd := exec.Command("bash", "-c", "sleep 1013 >/dev/null & echo $!")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = proc.StartCmd(cmd)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	tr.Add(cmd.Process.Pid, "")
	var left int
	fmt.Fscan(out, &left)
	proc.WaitCmd(cmd)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Println(err)
		return 1
	}
	none := rl
	none.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &none); err != nil {
		fmt.Println(err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		tr.KillAll(0)
		close(done)
	}()
	time.Sleep(300 * time.Millisecond)
	unix.Setrlimit(unix.RLIMIT_NOFILE, &rl)
	<-done
	if p, err := proc.Stat(left); err == nil && p.Alive() {
		fmt.Println("alive")
		unix.Kill(left, unix.SIGKILL)
		return 0
	}
	fmt.Println("gone")
	return 0
}

// TestKillAllWhileScansFail: a kill whose scans of /proc fail (no
// descriptor left: EMFILE) does not take the failures for scans that
// found nothing; it goes on until a scan works, and kills what is left.
func TestKillAllWhileScansFail(t *testing.T) {
	marker := clean(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(testutil.Env(marker), scanFailHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "gone" {
		t.Errorf("helper: %v, said %q; want \"gone\": the leftover killed once the scans worked again", err, got)
	}
}

// TestTrackerReusedSessionID: an entry left by a session that is gone
// does not take the session that has its id now (the pid reused): a kill
// of the old entry's owner leaves the new session's processes alone.
func TestTrackerReusedSessionID(t *testing.T) {
	marker := clean(t)
	other := startSession(t, marker, "sleep 1014")
	done := waitAsync(other)
	tr := proc.NewTracker()
	tr.AddReused(other.Process.Pid, "gone")
	tr.KillOwner("gone", 0)
	if p, err := proc.Stat(other.Process.Pid); err != nil || !p.Alive() {
		t.Errorf("the session that reused the id was killed: %v, state %c", err, p.State)
	}
	other.Process.Kill()
	recv(t, done)
}

// TestTrackerReusedEscapeeSessionID: the same for the entry of an
// escapee's session whose leader had exited when the entry was made: a
// process with that pid started after that scan is not its leader.
func TestTrackerReusedEscapeeSessionID(t *testing.T) {
	marker := clean(t)
	other := startSession(t, marker, "sleep 1015")
	done := waitAsync(other)
	p, err := proc.Stat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	tr := proc.NewTracker()
	tr.AddEscapee(other.Process.Pid, 1, "gone", p.StartTime-1)
	tr.KillOwner("gone", 0)
	if p, err := proc.Stat(other.Process.Pid); err != nil || !p.Alive() {
		t.Errorf("the session that reused the id was killed: %v, state %c", err, p.State)
	}
	other.Process.Kill()
	recv(t, done)
}
