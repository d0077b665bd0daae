//go:build linux

package nsinit

import (
	"slices"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
)

// Who started what. Every scan of the namespace's /proc (on each SIGCHLD
// the init gets, each release and each kill of leftovers) charges every
// process it sees for the first time to the commands that started it,
// and the charge stays with the process (by pid and start time) for its
// whole life, whatever it does later:
//
//  1. a command's own shell is charged to that command;
//  2. a process whose parent was charged is charged to the same commands,
//     even if it left the group and session (setsid), and it keeps that
//     charge after its parent exits and it is re-parented to the init;
//  3. a process still in the process group of a command the server
//     holds (or in the session of a terminal's program, the only
//     commands that lead a session) is charged to that command;
//  4. an orphan seen for the first time, its parent already gone (the
//     middle process of a double fork that exited between two scans), is
//     charged to every command that could have started it: spawned
//     before it started, and with something of it alive when it did.
//
// With one command running at a time, rule 4 is exact; with several
// running at once, such an orphan is killed with any of them rather than
// outliving the one that started it. Everything else is exact.

// procKey names one process for good: a reused pid has a later start.
type procKey struct {
	pid   int
	start uint64
}

func keyOf(p proc.Info) procKey { return procKey{p.Pid, p.StartTime} }

// ticksPerSecond is the kernel's USER_HZ, the unit of proc.Info.StartTime:
// 100 on every Linux architecture's user-space ABI.
const ticksPerSecond = 100

// nowTicks is the current time in the unit and from the origin of
// proc.Info.StartTime (ticks since boot, suspend included).
func nowTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*ticksPerSecond + uint64(ts.Nsec)/(1e9/ticksPerSecond)
}

// account brings the ledger up to date with infos, a fresh scan: it
// charges new processes, forgets the gone ones, notes which commands
// still have something alive, and forgets commands that are released and
// have nothing left. mu must be held.
func (s *initState) account(infos []proc.Info) {
	slices.SortFunc(infos, func(a, b proc.Info) int {
		if a.StartTime != b.StartTime {
			return int(int64(a.StartTime) - int64(b.StartTime))
		}
		return a.Pid - b.Pid
	})
	now := nowTicks()
	// Commands with something known alive, or dead since the previous
	// scan (an unreaped zombie, but for a command's own, which is kept
	// after its exit was reported), were alive until now: mark them so
	// before charging the new processes, since rule 4 asks who was alive
	// when they started.
	for _, p := range infos {
		if p.Pid != 1 && !s.heldZombie(p) {
			for _, c := range s.owners[keyOf(p)] {
				c.lastLive = now
			}
		}
	}
	byPid := make(map[int]procKey, len(infos))
	seen := make(map[procKey]bool, len(infos))
	// Commands with something in this scan, alive or a zombie: a fork
	// loop's scan may list its live generation, then find it gone by its
	// read, its child born after the listing, and see only the zombies of
	// the generations since the previous scan (the look reaps them after
	// this): the command is kept for its loop's next generation.
	present := make(map[*command]bool)
	for _, p := range infos {
		if p.Pid == 1 {
			continue
		}
		k := keyOf(p)
		byPid[p.Pid] = k
		seen[k] = true
		owners, ok := s.owners[k]
		if !ok {
			owners = s.chargeNew(p, byPid)
			s.owners[k] = owners
			// Alive until now, or dead since the previous scan, as the
			// known ones above (a command's own zombie, charged again
			// after a scan that ran before its spawn, aside): a fork
			// loop's generations since that scan are all new to this
			// one, each an orphan by now (its parent exited after its
			// fork), and rule 4 charges each only if its commands were
			// alive when it started, which this one's charge says of
			// them.
			if !s.heldZombie(p) {
				for _, c := range owners {
					c.lastLive = now
				}
			}
		}
		for _, c := range owners {
			present[c] = true
		}
	}
	for k := range s.owners {
		if !seen[k] {
			delete(s.owners, k)
		}
	}
	groups := make(map[int]bool)
	for _, p := range infos {
		if p.Pid != 1 && p.Alive() {
			groups[p.Pgid], groups[p.Sid] = true, true
		}
	}
	for pid, c := range s.cmds {
		// A scan is not a snapshot: it lists the pids, then reads each.
		// A fork loop's member listed alive may have forked and exited
		// by its read, its child born after the listing: the scan then
		// sees nothing of the group. The kernel knows better: a group
		// with a member (a zombie included) answers a signal 0, and its
		// id is no other process's meanwhile. Without this, a released
		// command was forgotten there, and every later generation of its
		// loop was nobody's (counted 0, never killed: one CI run's
		// LeftoverForkLoop).
		c.groupSeen = groups[pid] || c.released && groupExists(pid)
		if c.released && !present[c] && !c.groupSeen {
			delete(s.cmds, pid)
		}
	}
}

// heldZombie reports whether p is the zombie of a command's own shell,
// kept after its exit was reported: no sign of life of that command.
func (s *initState) heldZombie(p proc.Info) bool {
	c := s.cmds[p.Pid]
	return c != nil && c.exited && !p.Alive()
}

// groupExists reports whether process group pgid has a member, a zombie
// included (kill(2) with signal 0 to the group).
func groupExists(pgid int) bool {
	return pgid > 1 && unix.Kill(-pgid, 0) != unix.ESRCH
}

// chargeNew returns the commands that started p, seen for the first time;
// byPid holds the processes of this scan that started before it.
func (s *initState) chargeNew(p proc.Info, byPid map[int]procKey) []*command {
	if c := s.cmds[p.Pid]; c != nil && c.start == p.StartTime {
		return []*command{c} // rule 1; normally charged at spawn already
	}
	if p.PPid != 1 {
		if pk, ok := byPid[p.PPid]; ok {
			return s.owners[pk] // rule 2
		}
	}
	for _, id := range []int{p.Pgid, p.Sid} {
		// Rule 3: the held zombie keeps the id its own; once released,
		// a group or session the last scan saw alive kept it too (a fork
		// loop of the command's, whose every generation is new to a scan
		// and whose parent is gone: rule 4's ticks lose it under load).
		if c := s.cmds[id]; c != nil && (!c.released || c.groupSeen) {
			return []*command{c}
		}
	}
	var out []*command // rule 4
	for _, c := range s.cmds {
		// The ledger's times are ticks: one tick of slack on each side.
		if c.start <= p.StartTime+1 && p.StartTime <= c.lastLive+1 {
			out = append(out, c)
		}
	}
	return out
}
