package sandbox

import "golang.org/x/sys/unix"

// dirID is the device, inode and change time of dir (not followed if a
// symlink).
func dirID(dir string) (searchEntry, bool) {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil {
		return searchEntry{}, false
	}
	return searchEntry{Dev: uint64(st.Dev), Ino: st.Ino, Ctime: st.Ctim.Nano()}, true
}
