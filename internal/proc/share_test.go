//go:build linux

package proc_test

import (
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// Each scan of /proc reads every process. A burst of kills that each made
// their own scans would cost the square of the number of processes, and
// kills that waited for each other's scans outlast any grace on a loaded
// machine (docs/executor.md#killing): concurrent callers share them.

const sharers = 60

// TestKillsQueuedBehindASpawnShareScans: kills that find a spawn in
// flight (it holds the spawn lock, which their scans need) all wait for
// it, then share the scans that follow instead of scanning in turn. Alone,
// each kill scans at least twice: until two scans in a row find nothing
// left.
func TestKillsQueuedBehindASpawnShareScans(t *testing.T) {
	marker := clean(t)
	tr := proc.NewTracker()
	cmds := make([]*exec.Cmd, sharers)
	for i := range cmds {
		cmds[i] = startSession(t, marker, "exit 0")
		tr.Add(cmds[i].Process.Pid, "")
	}
	unlock := proc.LockSpawn()
	before := proc.Scans()
	var wg sync.WaitGroup
	for _, cmd := range cmds {
		wg.Go(func() { tr.KillCommand(cmd.Process.Pid, time.Second, nil) })
	}
	time.Sleep(200 * time.Millisecond) // the kills queue up
	unlock()
	wg.Wait()
	assertShared(t, "kills queued behind a spawn", before, cmds)
}

// TestConcurrentGroupAliveShareScans: GroupAlive calls made at once for
// groups whose leader is a zombie share their scans. Alone, each call
// scans twice to see its group gone.
func TestConcurrentGroupAliveShareScans(t *testing.T) {
	marker := clean(t)
	cmds := make([]*exec.Cmd, sharers)
	for i := range cmds {
		cmds[i] = startSession(t, marker, "exit 0")
	}
	for _, cmd := range cmds {
		proc.WaitExited(cmd.Process.Pid) // a zombie, left unreaped
	}
	before := proc.Scans()
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for _, cmd := range cmds {
		wg.Go(func() {
			<-gate
			if proc.GroupAlive(cmd.Process.Pid) {
				t.Errorf("group %d of a zombie leader: alive", cmd.Process.Pid)
			}
		})
	}
	close(gate)
	wg.Wait()
	assertShared(t, "concurrent GroupAlive calls", before, cmds)
}

// assertShared fails unless the sharers (what) made fewer scans of /proc
// since before than there are of them, then reaps their commands.
func assertShared(t *testing.T, what string, before int64, cmds []*exec.Cmd) {
	t.Helper()
	n := proc.Scans() - before
	t.Logf("%d %s: %d scans of /proc", sharers, what, n)
	if n >= sharers {
		t.Errorf("%d %s made %d scans of /proc, want them shared (fewer than %d)", sharers, what, n, sharers)
	}
	for _, cmd := range cmds {
		proc.WaitCmd(cmd)
	}
}
