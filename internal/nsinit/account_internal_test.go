//go:build linux

package nsinit

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// TestGroupPastTheScan: a scan lists the pids, then reads each, so a
// fork loop's member listed alive may have forked and exited by its
// read, its child born after the listing, and the scan sees nothing of
// the group. A released command whose group the kernel still holds is
// kept, its group counted as seen (so that the loop's next generation is
// charged to it), until the group is gone.
func TestGroupPastTheScan(t *testing.T) {
	// Claimed (proc.StartCmd): out of our group, it is otherwise an
	// orphan an orphan reaper of this process may take from under Wait.
	member := exec.Command("sleep", "30")
	member.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := proc.StartCmd(member); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { member.Process.Kill(); proc.WaitCmd(member) })
	pgid := member.Process.Pid
	c := &command{pid: pgid, exited: true, released: true}
	s := &initState{cmds: map[int]*command{pgid: c}, owners: make(map[procKey][]*command)}

	s.account(nil) // a scan that saw nothing of the group
	if s.cmds[pgid] != c || !c.groupSeen {
		t.Fatalf("a released command whose group lives: kept %v, group seen %v; want both", s.cmds[pgid] == c, c.groupSeen)
	}

	member.Process.Kill()
	proc.WaitCmd(member)
	s.account(nil)
	if s.cmds[pgid] != nil || c.groupSeen {
		t.Fatalf("a released command whose group is gone: kept %v, group seen %v; want neither", s.cmds[pgid] == c, c.groupSeen)
	}
}

// TestLoopPastTheScan: a fork loop that left the command's group (setsid)
// and whose every generation exits right after its fork may show a scan
// nothing alive, only the zombies of the generations since the previous
// scan (the live one listed, then gone by its read, its child born after
// the listing). Those zombies are the command's: it is kept, and the
// loop's next generation, seen alive by the next scan, is charged to it.
// It used to be forgotten there, and the loop was nobody's (counted 0,
// never killed: TestLeftoversCount, once, in a full run of the package).
func TestLoopPastTheScan(t *testing.T) {
	const pgid = 1 << 30 // no such group: past any pid_max
	c := &command{pid: pgid, exited: true, released: true, start: nowTicks() - 1}
	s := &initState{cmds: map[int]*command{pgid: c}, owners: make(map[procKey][]*command)}
	gen := func(pid int, state byte) proc.Info {
		return proc.Info{Pid: pid, PPid: 1, Pgid: 500, Sid: 500, State: state, StartTime: nowTicks()}
	}
	first := gen(501, 'R')
	s.owners[keyOf(first)] = []*command{c}
	s.account([]proc.Info{first})

	dead, next := first, gen(502, 'Z')
	dead.State = 'Z'
	s.account([]proc.Info{dead, next})
	if s.cmds[pgid] != c {
		t.Fatal("a released command whose loop a scan saw only as zombies: forgotten; want kept")
	}
	if !chargedTo(s.owners[keyOf(next)], c) {
		t.Fatalf("the loop's zombie seen first: charged to %v; want the command", s.owners[keyOf(next)])
	}

	live := gen(503, 'R')
	s.account([]proc.Info{live})
	if !chargedTo(s.owners[keyOf(live)], c) {
		t.Errorf("the loop's next generation: charged to %v; want the command", s.owners[keyOf(live)])
	}

	s.account(nil) // nothing of it left
	if s.cmds[pgid] != nil {
		t.Error("a released command with nothing left: kept; want forgotten")
	}
}

// TestLoopBetweenScans: a fork loop that left a held command's group
// (setsid), each generation exiting right after its fork, shows the next
// scan only new orphans: every generation since the previous scan, each
// re-parented to the init as its parent exited. Rule 4 charges the first
// (it started while the command's last known process lived); each later
// one started while the one before it lived, which the first one's charge
// must say. It used to leave the command's time of life at the previous
// scan, so that a generation started more than a tick after it was
// nobody's, and the loop with it (TestKillLeftoversForkLoop, once in CI:
// KillLeftovers returned at once with the loop alive).
func TestLoopBetweenScans(t *testing.T) {
	const pgid = 1 << 30 // no such group: past any pid_max
	c := &command{pid: pgid, exited: true, start: nowTicks() - 1}
	s := &initState{cmds: map[int]*command{pgid: c}, owners: make(map[procKey][]*command)}
	gen := func(pid int, start uint64) proc.Info {
		return proc.Info{Pid: pid, PPid: 1, Pgid: 500, Sid: 500, State: 'Z', StartTime: start}
	}
	first := gen(501, nowTicks())
	first.State = 'R'
	s.owners[keyOf(first)] = []*command{c}
	s.account([]proc.Info{first})
	scanned := c.lastLive

	// The loop's generations since: the first forked while the scan above
	// read it, the last several ticks after that scan.
	second := gen(502, first.StartTime)
	for time.Sleep(50 * time.Millisecond); nowTicks() < scanned+4; {
		time.Sleep(10 * time.Millisecond)
	}
	third := gen(503, nowTicks()-1)
	live := gen(504, nowTicks())
	live.State = 'R'
	s.account([]proc.Info{live, third, second}) // the first reaped
	for _, p := range []proc.Info{second, third, live} {
		if !chargedTo(s.owners[keyOf(p)], c) {
			t.Errorf("generation %d (started %d ticks after the previous scan): charged to %v; want the command",
				p.Pid, int64(p.StartTime)-int64(scanned), s.owners[keyOf(p)])
		}
	}
}
