//go:build linux

package nsinit

import (
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// countScans bounds the scans countLeftovers makes while it finds only
// traces of a process that forks and exits in a loop, before it counts
// the loop as one live process.
const countScans = 4

// countLeftovers counts the live processes charged to c, c's own shell
// aside (docs/containment.md#killing-what-a-command-left). A process that forks and exits
// in a loop is rarely seen alive by a scan, but each generation leaves a
// zombie child of the init, charged to c, until the next scan reaps it:
// when a scan finds such zombies, it is made again, and a loop that
// leaves new ones at every scan counts as one (proc.LoopCount).
func (s *initState) countLeftovers(c *command) int {
	delay := time.Millisecond
	var n proc.LoopCount
	for try := 0; ; try++ {
		live, traces := 0, 0
		err := s.look(func(infos []proc.Info) {
			for _, p := range infos {
				if p.Pid == 1 || p.Pid == c.pid && p.StartTime == c.start || !chargedTo(s.owners[keyOf(p)], c) {
					continue
				}
				switch {
				case p.Alive():
					live++
				case p.PPid == 1:
					traces++ // reaped by the look, after the scan
				}
			}
		})
		if err != nil {
			return 0
		}
		if live == 0 && traces == 0 && c.released && c.groupSeen {
			// Nothing seen, but its group has a member: a fork loop's,
			// which a scan may miss (see account). A trace of one.
			traces = 1
		}
		if count, done := n.Scan(live, traces, try == countScans-1); done {
			return count
		}
		time.Sleep(delay)
		delay = min(2*delay, 8*time.Millisecond)
	}
}
