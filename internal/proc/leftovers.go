//go:build linux

package proc

import (
	"os"
	"time"
)

// leftoverScans bounds the scans CountCommand makes while it finds only
// traces of a process that forks and exits in a loop (zombies of ours in
// the command's sessions, each scan new ones), before it counts the loop
// as one live process.
const leftoverScans = 4

// CountCommand counts the live processes the command added as sid left
// running once its shell is gone: the members of its session (its group
// included) and the sessions of escapees attributed to it, with their
// descendants, as KillAll would find them. A process that forks and exits
// in a loop is rarely seen alive by a scan; the zombies it leaves are our
// children and stay in its session until reaped, so when a scan finds no
// live process but such zombies, they are reaped and the scan made again,
// and a loop that leaves new ones each time counts as one process.
//
// Most commands leave nothing, and a scan of /proc costs a thousand reads
// when a thousand commands run: so two looks in a row that find nothing of
// the command's among our children (MayHaveLeftovers; every process left
// in its session is our child or below one of ours in it, the shell being
// gone) answer 0 without a scan.
func (t *Tracker) CountCommand(sid int) int {
	if !t.MayHaveLeftovers(sid) && !t.MayHaveLeftovers(sid) {
		return 0
	}
	self := os.Getpid()
	delay := firstPoll
	for try := 0; ; try++ {
		held := make(map[int]int)
		found, seen := t.collect(self, scope{root: sid}, held, make(map[int]bool))
		n, traces := len(found), len(held)
		release(held) // reaps them: the next scan's are new
		switch {
		case !seen && try == leftoverScans-1:
			return 0 // /proc unreadable all along: nothing to show
		case !seen:
		case n > 0:
			return n
		case traces == 0:
			return 0
		case try == leftoverScans-1:
			return 1
		}
		time.Sleep(delay)
		delay = min(2*delay, maxPoll)
	}
}

// KillCommandAll is KillCommand for a command whose shell is gone and
// released: what it left in its own group is taken too, with the rest of
// its session and its escapees' sessions, and everything below them.
func (t *Tracker) KillCommandAll(sid int, grace time.Duration) {
	t.kill(grace, scope{root: sid})
}
