//go:build linux

package proc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// KernelRelease is the running kernel's release, major and minor.
func KernelRelease() (major, minor int, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, 0, fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return 0, 0, fmt.Errorf("kernel release %q: %w", release, err)
	}
	return major, minor, nil
}
