//go:build linux

package proc

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

// Scans reports how many scans of /proc this process has made.
func Scans() int64 { return scans.Load() }

// GroupScans reports how many scans of /proc GroupAlive has made.
func GroupScans() int64 { return groupScanRounds.Load() }
