package proc

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Tracker records the sessions of one executor's commands, so that closing
// the executor can kill everything they left behind. It is safe for
// concurrent use. The zero value is not usable; call NewTracker.
//
// Which sessions are tracked is kept process-wide: a session id is a pid,
// and once every member of a session is gone the number may be handed to a
// new command of another executor in this process. Add therefore moves a
// session id to the tracker that adds it last, so one executor's KillAll
// never takes another executor's newer command for an old session of its
// own. Sessions seen empty are forgotten from time to time, so a
// long-running server does not accumulate them.
type Tracker struct {
	_ [0]func() // not comparable, not copyable by accident
	// id makes every Tracker a distinct, non-zero-size value, so that
	// pointers to two trackers never compare equal.
	id uint64
}

type sessionEntry struct {
	owner   *Tracker
	seq     uint64 // distinguishes a re-Add of the same id from the entry a prune looked at
	suspect bool   // seen without a live member by the previous prune
}

var registry struct {
	mu       sync.Mutex
	sessions map[int]*sessionEntry
	seq      uint64
	pruneAt  int
	pruning  bool
	trackers uint64
}

const minPruneAt = 256

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.trackers++
	return &Tracker{id: registry.trackers}
}

// Add tracks the session sid: the pid of a command's shell, which is also
// its process group id and session id. Call it right after the spawn,
// while the shell's pid is still claimed (so the number cannot have been
// reused).
//
// Sessions stay tracked until KillAll, or until a periodic prune sees them
// empty: a group member that outlives its shell's normal exit (a server a
// model started on purpose) is left running and killed by KillAll.
func (t *Tracker) Add(sid int) {
	if sid <= 1 {
		return
	}
	registry.mu.Lock()
	if registry.sessions == nil {
		registry.sessions = make(map[int]*sessionEntry)
	}
	registry.seq++
	registry.sessions[sid] = &sessionEntry{owner: t, seq: registry.seq}
	prune := !registry.pruning && len(registry.sessions) >= max(registry.pruneAt, minPruneAt)
	if prune {
		registry.pruning = true
	}
	registry.mu.Unlock()
	if prune {
		pruneSessions()
	}
}

// pruneSessions forgets sessions that have no live member in two prunes in
// a row (one Scan can miss a member forked during it). A session cannot
// gain members once it has none, so forgetting it loses nothing.
func pruneSessions() {
	registry.mu.Lock()
	seen := make(map[int]uint64, len(registry.sessions))
	for sid, e := range registry.sessions {
		seen[sid] = e.seq
	}
	registry.mu.Unlock()

	infos, err := Scan()
	live := make(map[int]bool)
	for _, p := range infos {
		if p.Alive() {
			live[p.Sid] = true
		}
	}

	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.pruning = false
	if err == nil {
		for sid, seq := range seen {
			e := registry.sessions[sid]
			if e == nil || e.seq != seq {
				continue
			}
			switch {
			case live[sid]:
				e.suspect = false
			case e.suspect:
				delete(registry.sessions, sid)
			default:
				e.suspect = true
			}
		}
	}
	registry.pruneAt = 2*len(registry.sessions) + minPruneAt
}

// owners returns, for each tracked session id, whether t owns it.
func (t *Tracker) owners() map[int]bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m := make(map[int]bool, len(registry.sessions))
	for sid, e := range registry.sessions {
		m[sid] = e.owner == t
	}
	return m
}

func (t *Tracker) forget(sids map[int]bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for sid, mine := range sids {
		if e := registry.sessions[sid]; mine && e != nil && e.owner == t {
			delete(registry.sessions, sid)
		}
	}
	registry.pruneAt = 2*len(registry.sessions) + minPruneAt
}

// KillAll kills every live process that belongs to t and waits until all
// are gone, reaping the zombies among our unclaimed children. It returns
// after at most about grace + KillWait.
//
// It belongs to t:
//
//	(a) every process whose session is tracked by t: group members left
//	    running, double forks (`( ( sleep 1000 & ) & )`) and
//	    `nohup … & disown`, which keep their session;
//	(b) every escapee: a direct child of this process that is not claimed,
//	    not in this process's group or session, and not in a session
//	    another Tracker tracks. That is a process that left its session
//	    (`setsid`) and was re-parented to us when its shell exited. Nothing
//	    records which executor such a process came from, so ANY tracker's
//	    KillAll takes every escapee of the process;
//	(c) every descendant of a process in (a) or (b).
//
// Only descendants of this process are ever signalled (a tracked session
// id that was reused outside our tree is left alone), each by pid through
// Signal, so a pid reused meanwhile is never hit. Without BecomeSubreaper,
// a member whose parent exited is re-parented to init, is no longer our
// descendant, and is out of reach.
//
// Each round scans /proc afresh: SIGTERM goes to every process once, as
// it is found; after grace, SIGKILL goes to everything still alive, again
// each round, so processes forked meanwhile are caught too. KillAll
// returns when two scans in a row find nothing alive, or when KillWait has
// passed after grace. The tracked sessions are then forgotten; Add may be
// called again afterwards, but a session added while KillAll runs may
// survive it.
func (t *Tracker) KillAll(grace time.Duration) {
	self := os.Getpid()
	termUntil := time.Now().Add(grace)
	giveUpAt := termUntil.Add(KillWait)
	termed := make(map[Info]bool)
	sids := t.owners()
	empty := 0
	delay := firstPoll
	for {
		targets := t.collect(self, sids)
		if len(targets) == 0 {
			empty++
			if empty >= 2 {
				break
			}
		} else {
			empty = 0
		}
		now := time.Now()
		kill := !now.Before(termUntil)
		for _, p := range targets {
			switch {
			case kill:
				Signal(p, unix.SIGKILL)
			case !termed[key(p)]:
				termed[key(p)] = true
				Signal(p, unix.SIGTERM)
			}
		}
		if !now.Before(giveUpAt) {
			break
		}
		time.Sleep(delay)
		if len(targets) > 0 {
			delay = min(2*delay, maxPoll)
		}
		sids = t.owners()
	}
	t.forget(sids)
}

// key is the identity of a process for "signalled already": pid and start
// time, nothing that changes while it runs.
func key(p Info) Info { return Info{Pid: p.Pid, StartTime: p.StartTime} }

// collect scans /proc under the spawn lock, reaps what is reapable and
// returns the live processes that belong to t (see KillAll). sids maps
// every tracked session to whether t owns it.
func (t *Tracker) collect(self int, sids map[int]bool) []Info {
	spawnMu.Lock()
	infos, err := Scan()
	if err != nil {
		spawnMu.Unlock()
		return nil
	}
	selfPgid := unix.Getpgrp()
	selfSid, _ := unix.Getsid(0)
	reapLocked(infos, self, selfPgid)
	children := make(map[int][]int, len(infos)) // ppid → indices into infos
	for i, p := range infos {
		children[p.PPid] = append(children[p.PPid], i)
	}
	// Our descendants, in BFS order: a parent always comes before its
	// children, so one pass below can propagate membership down.
	var desc []int
	queue := children[self]
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		desc = append(desc, i)
		queue = append(queue, children[infos[i].Pid]...)
	}
	in := make(map[int]bool) // pids that belong to t
	var out []Info
	for _, i := range desc {
		p := infos[i]
		mine, tracked := sids[p.Sid]
		member := mine ||
			in[p.PPid] ||
			(p.PPid == self && !tracked && p.Pgid != selfPgid && p.Sid != selfSid && !isClaimed(p.Pid))
		if !member {
			continue
		}
		in[p.Pid] = true
		if p.Alive() {
			out = append(out, p)
		}
	}
	spawnMu.Unlock()
	return out
}
