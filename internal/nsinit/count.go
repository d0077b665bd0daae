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
// when a scan finds no live process of c but such zombies, it is made
// again, and a loop that leaves new ones at every scan counts as one.
func (s *initState) countLeftovers(c *command) int {
	delay := time.Millisecond
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
		switch {
		case err != nil:
			return 0
		case live > 0:
			return live
		case traces == 0 && !(c.released && c.groupSeen):
			// Nothing charged to it alive or dying, and its group gone
			// (a scan may miss a fork loop's member: see account).
			return 0
		case try == countScans-1:
			return 1
		}
		time.Sleep(delay)
		delay = min(2*delay, 8*time.Millisecond)
	}
}
