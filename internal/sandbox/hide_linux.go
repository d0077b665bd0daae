//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HideExcept covers root with an empty tmpfs and binds each of keep (a
// path below root) back in its place: commands see the kept paths, read
// and write them as before, and nothing else of root, whoever made it
// and whenever. The tmpfs is then made read-only, so nothing can be put
// beside them (it is the init's: a command has no capability to remount
// it). With nothing to keep, root is simply covered. It must run in a
// private mount namespace with CAP_SYS_ADMIN there, like Mount.
func HideExcept(root string, keep ...string) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, k := range keep {
		rel, err := filepath.Rel(root, k)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s is not below %s", k, root)
		}
		// Held before the tmpfs covers it: the bind's source.
		fd, err := unix.Open(k, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", k, err)
		}
		fds = append(fds, fd)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", root, "tmpfs", flags, "size=16k,mode=0700"); err != nil {
		return fmt.Errorf("cover %s: %w", root, err)
	}
	for i, k := range keep {
		var st unix.Stat_t
		if err := unix.Fstat(fds[i], &st); err != nil {
			return fmt.Errorf("stat %s: %w", k, err)
		}
		if err := os.MkdirAll(filepath.Dir(k), 0o700); err != nil {
			return err
		}
		// The mount point: a directory for a directory, a file for the
		// rest.
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if err := os.Mkdir(k, 0o700); err != nil && !os.IsExist(err) {
				return err
			}
		} else if f, err := os.OpenFile(k, os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
			return err
		} else {
			f.Close()
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fds[i]), k, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back: %w", k, err)
		}
	}
	if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("make the cover of %s read-only: %w", root, err)
	}
	return nil
}

// hide covers path, one of Plan.Hidden: a file by /dev/null, a directory
// by HideExcept, keeping the writable roots that lie inside it.
func hide(path string, writable []string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // gone since Resolve
	}
	if !fi.IsDir() {
		return BindReadOnly(os.DevNull, path)
	}
	var keep []string
	for _, w := range writable {
		if w != path && within(w, []string{path}) {
			keep = append(keep, w)
		}
	}
	return HideExcept(path, keep...)
}
