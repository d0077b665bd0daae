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
// children and stay in its session until reaped, so when a scan finds
// such zombies, they are reaped and the scan made again, and a loop that
// leaves new ones each time counts as one process (LoopCount).
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
	var c LoopCount
	for try := 0; ; try++ {
		held := make(map[int]int)
		found, seen := t.collect(self, scope{root: sid}, held, make(map[int]bool))
		n, traces := len(found), len(held)
		release(held) // reaps them: the next scan's are new
		if !seen {
			if try == leftoverScans-1 {
				return c.n // /proc unreadable: what earlier scans showed
			}
		} else if count, done := c.Scan(n, traces, try == leftoverScans-1); done {
			return count
		}
		time.Sleep(delay)
		delay = min(2*delay, maxPoll)
	}
}

// LoopCount counts a command's leftovers over successive scans of
// its live processes and of the traces a process that forks and exits
// in a loop leaves (zombies of the command, which the scan reaps): the
// loop's processes are rarely alive when a scan reads them. A scan
// without traces counts its live processes. Traces at every scan up to
// the last mean a loop, counted as one beside the fewest live processes
// a scan saw (the loop may have been among them in every scan: it then
// counts as two). Before, a scan that found other live processes was
// taken as it was, and a loop beside them counted as none when the scan
// did not see it alive (TestTaskLeftovers).
type LoopCount struct {
	n    int  // the fewest live processes a scan saw
	seen bool // a scan was taken
}

// Scan takes one scan's live processes and traces, last when no more
// scans will be made, and reports the count and whether it is known.
func (c *LoopCount) Scan(live, traces int, last bool) (int, bool) {
	if !c.seen || live < c.n {
		c.n = live
	}
	c.seen = true
	switch {
	case traces == 0:
		return live, true
	case last:
		return c.n + 1, true
	}
	return 0, false
}

// KillCommandAll is KillCommand for a command whose shell is gone and
// released: what it left in its own group is taken too, with the rest of
// its session and its escapees' sessions, and everything below them.
func (t *Tracker) KillCommandAll(sid int, grace time.Duration) {
	t.kill(grace, scope{root: sid})
}
