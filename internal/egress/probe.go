//go:build linux

package egress

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// TUNDevice is the device node a session's init opens.
const TUNDevice = "/dev/net/tun"

// Probe reports whether this process (and so an init it starts, which
// runs as the same user) can open TUNDevice: the filtered network modes
// need it. The error names the cause: a missing node, or its mode when
// this user may not open it (these machines ship it 0600, root only;
// Debian's udev makes it 0666).
func Probe() error {
	f, err := os.OpenFile(TUNDevice, os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return nil
	}
	if errors.Is(err, fs.ErrPermission) {
		if fi, serr := os.Stat(TUNDevice); serr == nil {
			return fmt.Errorf("%s is mode %04o: only its owner may open it (Debian's default is 0666): %w", TUNDevice, fi.Mode().Perm(), err)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s (a kernel without TUN, or a container without the device): %w", TUNDevice, err)
	}
	return err
}

// DeviceMode is TUNDevice's permission bits, for conch doctor; 0 and an
// error when it cannot be read.
func DeviceMode() (fs.FileMode, error) {
	var st unix.Stat_t
	if err := unix.Stat(TUNDevice, &st); err != nil {
		return 0, err
	}
	return fs.FileMode(st.Mode & 0o777), nil
}
