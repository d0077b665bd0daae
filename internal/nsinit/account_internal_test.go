//go:build linux

package nsinit

import (
	"os/exec"
	"syscall"
	"testing"

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
