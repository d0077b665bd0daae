//go:build linux

package proc

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A scan reads every process in /proc, so a burst of kills that each made
// their own scans would cost the square of the number of processes, and,
// for the scans that must hold spawnMu, would wait for each other's in
// turn: a thousand tasks killed at once then outlast any grace on a loaded
// machine (docs/executor.md#killing). Concurrent callers therefore share
// scans: each caller gets a scan that started after its call, the same
// one as every other caller that asked before that scan started.

// A snapshot is what one round read (a Scan of /proc), seen by every
// caller of the round. Its indexes are built on first use; the visits of
// a round run one after another, so they need no lock.
type snapshot struct {
	infos []Info
	err   error
	kids  map[int][]int // ppid → indices into infos
	live  map[int]bool  // process groups with a live member
	desc  map[int][]int // sid → indices into infos of our descendants in it
}

// children returns the indices into s.infos of the processes whose
// parent is pid.
func (s *snapshot) children(pid int) []int {
	if s.kids == nil {
		s.kids = make(map[int][]int, len(s.infos))
		for i, p := range s.infos {
			s.kids[p.PPid] = append(s.kids[p.PPid], i)
		}
	}
	return s.kids[pid]
}

// inSession returns the indices into s.infos of the descendants of self
// in session sid.
func (s *snapshot) inSession(self, sid int) []int {
	if s.desc == nil {
		s.desc = make(map[int][]int)
		queue := s.children(self)
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			s.desc[s.infos[i].Sid] = append(s.desc[s.infos[i].Sid], i)
			queue = append(queue, s.children(s.infos[i].Pid)...)
		}
	}
	return s.desc[sid]
}

// groupAlive reports whether the scan saw a live member of group pgid.
func (s *snapshot) groupAlive(pgid int) bool {
	if s.live == nil {
		s.live = make(map[int]bool)
		for _, p := range s.infos {
			if p.Alive() {
				s.live[p.Pgid] = true
			}
		}
	}
	return s.live[pgid]
}

// scanShare runs scans of /proc for concurrent callers, one round at a
// time. A round takes every caller that joined before it started, and
// run makes its one scan and calls each caller's visit with it. The
// callers that wait for a round do not queue for the lock run takes
// (spawnMu for the kills): one of them runs the round, the others only
// wait for its end.
type scanShare struct {
	run  func(visits []func(*snapshot))
	turn chan struct{} // a one-slot semaphore: held while a round is taken and run

	mu   sync.Mutex
	next *scanRound // the round that callers join; nil when none waits
}

type scanRound struct {
	visits []func(*snapshot)
	done   chan struct{}
}

func newScanShare(run func(visits []func(*snapshot))) *scanShare {
	return &scanShare{run: run, turn: make(chan struct{}, 1)}
}

// do calls visit (nil: nothing to look at) with a scan that starts after
// do was called, and returns once the scan's round is over.
func (s *scanShare) do(visit func(*snapshot)) {
	s.mu.Lock()
	r := s.next
	if r == nil {
		r = &scanRound{done: make(chan struct{})}
		s.next = r
	}
	if visit != nil {
		r.visits = append(r.visits, visit)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return
	case s.turn <- struct{}{}:
	}
	// A round is taken and run only with the turn held: if r is no
	// longer the next one, it was run by whoever held the turn before.
	s.mu.Lock()
	mine := s.next == r
	if mine {
		s.next = nil
	}
	s.mu.Unlock()
	if mine {
		s.run(r.visits)
		close(r.done)
	}
	<-s.turn
	<-r.done
}

// killScans is the round of the scans that hold spawnMu: the kills of a
// Tracker, its prunes and the orphan reaper. Each round attributes the
// escapees it sees (see Tracker), lets its callers look (a kill pins the
// zombies it holds), then reaps what is reapable. So a round serves any
// number of kills at the cost of one scan.
var killScans = newScanShare(func(visits []func(*snapshot)) {
	spawnMu.Lock()
	defer spawnMu.Unlock()
	infos, err := scan()
	s := &snapshot{infos: infos, err: err}
	self, selfPgid := os.Getpid(), unix.Getpgrp()
	if err == nil {
		selfSid, _ := unix.Getsid(0)
		attributeLocked(infos, self, selfPgid, selfSid)
	}
	for _, v := range visits {
		v(s)
	}
	if err == nil {
		reapLocked(infos, self, selfPgid)
	}
})

// groupScans is the round of the scans of GroupAlive. They take no lock
// and reap nothing: GroupAlive also serves processes that are not this
// package's reaper (a namespace's init reaps its own children).
var groupScans = newScanShare(func(visits []func(*snapshot)) {
	groupScanRounds.Add(1)
	infos, err := scan()
	s := &snapshot{infos: infos, err: err}
	for _, v := range visits {
		v(s)
	}
})
