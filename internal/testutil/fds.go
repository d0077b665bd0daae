//go:build linux

package testutil

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// FDs returns the open file descriptors of this process, each with what
// it refers to (the target of its /proc/self/fd link: a path,
// "pipe:[…]", "anon_inode:[pidfd]"…). The directory read to list them is
// left out, and so are the descriptors that internal/proc's scans of
// /proc hold open for a moment (the orphan reaper wakes at every SIGCHLD,
// from any test's child): FDs lists while holding proc.LockSpawn, which
// those scans wait for.
func FDs(t testing.TB) map[int]string {
	t.Helper()
	unlock := proc.LockSpawn()
	defer unlock()
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatalf("testutil: list fds: %v", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.Fatalf("testutil: list fds: %v", err)
	}
	fds := make(map[int]string, len(names))
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == int(dir.Fd()) {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			continue // closed since the listing
		}
		fds[fd] = target
	}
	return fds
}

// AssertNoNewFDs fails t if descriptors that before (from FDs) does not
// hold stay open, naming each with its target. A descriptor another
// goroutine or the runtime holds for a moment is not a leak: it waits up
// to 3 s for the new ones to close before it fails.
func AssertNoNewFDs(t testing.TB, before map[int]string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		var added []string
		for fd, target := range FDs(t) {
			if was, ok := before[fd]; !ok || was != target {
				added = append(added, fmt.Sprintf("%d → %s", fd, target))
			}
		}
		if len(added) == 0 {
			return
		}
		if time.Now().After(deadline) {
			slices.Sort(added)
			t.Errorf("testutil: %d file descriptor(s) left open: %s", len(added), strings.Join(added, ", "))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
