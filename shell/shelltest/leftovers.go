//go:build linux

package shelltest

import (
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
)

// leftoverEscapees leaves three processes behind and exits 0 at once: a
// plain background sleep (in the command's group), a double fork (an
// orphan at once, in a group of its own), and a disowned nohup. Their
// output goes nowhere, so the process settles without waiting for a
// drain. None leaves the command's session: a process that does (setsid)
// is attributed by every provider with containment, but without it only
// while its parent lives or when no other command ran when it started
// (docs/executor.md#leftover-processes), so the providers' own tests
// cover it.
const leftoverEscapees = `sleep 1051 >/dev/null 2>&1 & ( ( sleep 1052 >/dev/null 2>&1 & ) & ); nohup sleep 1053 >/dev/null 2>&1 & disown; echo started`

// testLeftovers: a provider whose processes are shell.Leftovers counts
// what a command left running once it settled (0 before), the three
// kinds of leftover alike, and KillLeftovers ends them and nothing else:
// another command of the same executor runs on. (The other command
// starts after the leftovers, so that no provider could take its sleep
// for one of them.)
func testLeftovers(t *testing.T, su *suite) {
	ex, marker := su.exec(t, Config{})
	p := MustStart(t, ex, shell.Request{Command: leftoverEscapees})
	lo, ok := p.(shell.Leftovers)
	if !ok {
		t.Fatalf("%T is not a shell.Leftovers", p)
	}
	WaitDone(t, p, 10*time.Second)
	if p.Status() != shell.StatusCompleted {
		t.Fatalf("status %v, want completed", p.Status())
	}
	// The sleeps exec a moment after the command exits.
	for _, sleep := range []string{"sleep 1051", "sleep 1052", "sleep 1053"} {
		waitCommand(t, marker, sleep)
	}
	if n, err := lo.Leftovers(); n != 3 || err != nil {
		t.Errorf("Leftovers: %d, %v; want 3 (a sleep in the group, one of a double fork, a disowned nohup)", n, err)
	}
	other := MustStart(t, ex, shell.Request{Command: "echo ready; sleep 1050"})
	ReadUntil(t, other, func(r shell.ReadResult) bool { return r.Stdout == "ready\n" })
	// Its sleep must run before the kill, or the check after it sees a
	// sleep not yet started as taken (it failed so beside CPU burners).
	waitCommand(t, marker, "sleep 1050")
	if err := lo.KillLeftovers(); err != nil {
		t.Fatalf("KillLeftovers: %v", err)
	}
	for _, sleep := range []string{"sleep 1051", "sleep 1052", "sleep 1053"} {
		if running(marker, sleep) {
			t.Errorf("%q runs after KillLeftovers", sleep)
		}
	}
	if n, err := lo.Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers after KillLeftovers: %d, %v; want 0", n, err)
	}
	if !running(marker, "sleep 1050") || other.Status() != shell.StatusRunning {
		t.Error("KillLeftovers took another command's process")
	}
	// A command that leaves nothing counts nothing; before it settled,
	// nothing either.
	q := MustStart(t, ex, shell.Request{Command: "sleep 0.2"})
	if n, err := q.(shell.Leftovers).Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers while running: %d, %v; want 0", n, err)
	}
	WaitDone(t, q, 10*time.Second)
	if n, err := q.(shell.Leftovers).Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers of a command that left nothing: %d, %v; want 0", n, err)
	}
	other.Kill()
	WaitDone(t, other, 10*time.Second)
}

// testKillLeftoversAtDone: KillLeftovers the moment a command is done
// takes a background job still in the command's own group, every time,
// and nothing of it is counted after. (Done once came before the shell
// was reaped: the local provider's tracker then took the group for the
// shell's own and spared it, 6 or 7 runs in 100 here.)
func testKillLeftoversAtDone(t *testing.T, su *suite) {
	ex, marker := su.exec(t, Config{})
	for i := range 40 {
		p := MustStart(t, ex, shell.Request{Command: "sleep 1054 >/dev/null 2>&1 & exit 0"})
		WaitDone(t, p, 10*time.Second)
		lo := p.(shell.Leftovers)
		if err := lo.KillLeftovers(); err != nil {
			t.Fatalf("run %d: KillLeftovers: %v", i, err)
		}
		if running(marker, "sleep 1054") {
			t.Fatalf("run %d: the command's background job runs after KillLeftovers at its done", i)
		}
		if n, err := lo.Leftovers(); n != 0 || err != nil {
			t.Fatalf("run %d: Leftovers after KillLeftovers: %d, %v; want 0", i, n, err)
		}
	}
}

// testLeftoverForkLoop: a process that forks and exits in a loop,
// ignoring SIGTERM, counts as left running once its command exited, and
// KillLeftovers ends it.
func testLeftoverForkLoop(t *testing.T, su *suite) {
	ex, _ := su.exec(t, Config{})
	loop, beat := testutil.ForkLoop(t)
	p := MustStart(t, ex, shell.Request{Command: loop + " >/dev/null 2>&1 & echo started"})
	WaitDone(t, p, 10*time.Second)
	testutil.WaitBeating(t, beat)
	lo := p.(shell.Leftovers)
	if n, err := lo.Leftovers(); n < 1 || err != nil {
		t.Errorf("Leftovers of a fork loop: %d, %v; want at least 1", n, err)
	}
	if err := lo.KillLeftovers(); err != nil {
		t.Fatalf("KillLeftovers: %v", err)
	}
	if testutil.Beating(t, beat) {
		t.Error("the fork loop runs after KillLeftovers")
	}
	if n, err := lo.Leftovers(); n != 0 || err != nil {
		t.Errorf("Leftovers after KillLeftovers: %d, %v; want 0", n, err)
	}
}

// waitCommand waits until a process with the marker runs cmd.
func waitCommand(t *testing.T, marker, cmd string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, cmd, func() bool { return running(marker, cmd) })
}

// running reports whether a live process with the marker runs cmd.
func running(marker, cmd string) bool {
	for _, p := range testutil.Processes(marker) {
		if p.Alive() && testutil.Cmdline(p.Pid) == cmd {
			return true
		}
	}
	return false
}
