//go:build linux

package testutil

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// KernelAtLeast reports whether the running kernel's release is
// major.minor or later (a test of a feature that release added).
func KernelAtLeast(t testing.TB, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release, err)
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
