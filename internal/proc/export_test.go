//go:build linux

package proc

import "golang.org/x/sys/unix"

// ParseStat exposes the /proc/<pid>/stat parser to the tests.
var ParseStat = parseStat

// ReapScans reports how many scans the orphan reaper has started.
func ReapScans() int64 { return reapScans.Load() }

// ReapInterval is the orphan reaper's rate limit.
const ReapInterval = reapInterval

// TrackedSessions reports how many session ids all trackers hold.
func TrackedSessions() int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return len(registry.sessions)
}

// Tracks reports whether t tracks session sid.
func (t *Tracker) Tracks(sid int) bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	e := registry.sessions[sid]
	return e != nil && e.tracker == t
}

// Scans reports how many scans of /proc this process has made.
func Scans() int64 { return scans.Load() }

// GroupScans reports how many scans of /proc GroupAlive has made.
func GroupScans() int64 { return groupScanRounds.Load() }

// AddReused tracks sid for t and owner as a session whose leader started
// at a time no process did: as the entry of a session gone, whose id the
// kernel has since given to another process.
func (t *Tracker) AddReused(sid int, owner string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.sessions == nil {
		registry.sessions = make(map[int]*sessionEntry)
	}
	registry.seq++
	registry.sessions[sid] = &sessionEntry{tracker: t, owner: owner, root: sid, seq: registry.seq, start: 1, end: 2, leader: 1}
}

// AddEscapee tracks sid for t and owner as the session of a process that
// escaped command root, made by a scan whose latest start time was gone,
// in which no process had sid as its pid (its leader had exited).
func (t *Tracker) AddEscapee(sid, root int, owner string, gone uint64) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.sessions == nil {
		registry.sessions = make(map[int]*sessionEntry)
	}
	registry.seq++
	registry.sessions[sid] = &sessionEntry{tracker: t, owner: owner, root: root, seq: registry.seq, leaderGone: gone}
}

// KeptStatFiles reports the stat files kept open for the next scan, and
// DropStatFiles closes them and stops keeping them.
func KeptStatFiles() map[int]int {
	f := keptStatFiles.Load()
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[int]int, len(f.fds))
	for pid, sf := range f.fds {
		m[pid] = sf.fd
	}
	return m
}

func DropStatFiles() {
	f := keptStatFiles.Swap(nil)
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for pid, sf := range f.fds {
		unix.Close(sf.fd)
		delete(f.fds, pid)
	}
	// A scan that loaded f before the swap may still use it (the orphan
	// reaper's, say): it closes what it opens at its end.
	f.dropped = true
}
