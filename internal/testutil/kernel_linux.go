//go:build linux

package testutil

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/proc"
)

// KernelAtLeast reports whether the running kernel's release is
// major.minor or later (a test of a feature that release added).
func KernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	ma, mi, err := proc.KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	return ma > major || ma == major && mi >= minor
}

// SchedSlice is the value of the se.slice line of a sched file of /proc
// (the task's time slice, in ns), or "" without one.
func SchedSlice(sched string) string {
	for line := range strings.Lines(sched) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "se.slice" {
			return f[2]
		}
	}
	return ""
}
