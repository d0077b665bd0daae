//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/cachelayer"
)

// CacheOverlay and CacheCopy say how MountCaches gave commands their
// caches (Init.CacheLayer): copy-on-write over the user's, or conch's
// own copy alone where overlayfs cannot be mounted.
const (
	CacheOverlay = "overlay"
	CacheCopy    = "copy"
)

// MountCaches puts the cache layer over each of plan.Caches (the user's
// cache directories) for a session whose directory in the layer is
// session (cachelayer.Begin): an overlayfs whose lower layers are the
// layer's shared copy and the user's directory and whose upper layer is
// the session's, so that commands read the user's caches and write only
// to conch's layer. Where overlayfs cannot be mounted (a kernel before
// 5.11 in a user namespace, a file system it refuses), the layer's shared
// copy alone is bound over the user's directory: commands start from
// conch's copy (a cold cache) and still never write the user's. It must
// run before Mount, which hides the layer's directory. It returns
// CacheOverlay, or CacheCopy and why, for conch doctor.
func MountCaches(plan *Plan, session string) (how string, err error) {
	how = CacheOverlay
	var why error
	volatile, checked := false, false
	for _, c := range plan.Caches {
		shared := cachelayer.Shared(plan.CacheLayer, c)
		if mkErr := os.MkdirAll(shared, 0o700); mkErr != nil {
			// No layer for it: the user's directory stays read-only
			// (Landlock counts it writable, the mount does not).
			if err := BindReadOnly(c, c); err != nil {
				return "", fmt.Errorf("sandbox: cache layer for %s: %w", c, err)
			}
			how = fmt.Sprintf("none (%v)", mkErr)
			continue
		}
		if !checked {
			volatile, checked = !Journalless(shared), true
		}
		if why == nil {
			if session != "" && isEmpty(shared) && isEmpty(c) {
				// Nothing below to read (a cache whose tool has not
				// written it yet): the session's upper directory alone,
				// committed as an overlay's would be, and no overlay to
				// mount, to remove the work directory of and to unmount.
				why = bindUpper(c, session)
			} else {
				why = overlay(c, shared, session, volatile)
			}
			if why == nil {
				continue
			}
		}
		how = CacheCopy + " (overlayfs: " + why.Error() + ")"
		if err := bind(shared, c, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return "", fmt.Errorf("sandbox: cache layer for %s: %w", c, err)
		}
	}
	return how, nil
}

// Journalless reports whether dir lies on an ext4 file system without a
// journal (its device has no entry in /proc/fs/jbd2). There the cache
// layer's overlays are not volatile: such an ext4 gives a new inode
// none of those freed in the last 5 minutes while their inode table
// blocks wait to be written (recently_deleted in fs/ext4/ialloc.c, for
// file systems without a journal), which the unmount's sync writes; a
// volatile mount makes and frees four directories per cache per session
// and syncs nothing, and inode allocation then scanned ever longer: a
// server's session start took 5 ms more on this project's machine
// (docs/sandbox.md#the-cache-layer).
func Journalless(dir string) bool {
	var sfs unix.Statfs_t
	if unix.Statfs(dir, &sfs) != nil || sfs.Type != unix.EXT4_SUPER_MAGIC {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return false
	}
	dev, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return false
	}
	journals, err := os.ReadDir("/proc/fs/jbd2")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	for _, j := range journals {
		if strings.HasPrefix(j.Name(), filepath.Base(dev)+"-") {
			return false
		}
	}
	return true
}

// isEmpty reports whether dir is a directory with no entries.
func isEmpty(dir string) bool {
	empty, err := cachelayer.Empty(dir)
	return err == nil && empty
}

// bindUpper binds the session's upper directory for dir over dir,
// writable, without set-user-ID files or devices.
func bindUpper(dir, session string) error {
	if err := cachelayer.Prepare(session, dir); err != nil {
		return err
	}
	return bind(cachelayer.Upper(session, dir), dir, unix.MS_NOSUID|unix.MS_NODEV)
}

// overlay mounts an overlayfs on dir with the layer's shared copy and dir
// itself below and the session's directories above, through the new mount
// API (one value per call: no escaping of ':' or ',' in paths). user
// xattrs: trusted ones need privileges of the initial user namespace.
func overlay(dir, shared, session string, volatile bool) error {
	if session == "" {
		return errors.New("no session directory")
	}
	upper, work := cachelayer.Upper(session, dir), cachelayer.Work(session, dir)
	if err := cachelayer.Prepare(session, dir); err != nil {
		return err
	}
	cachelayer.ClearVolatile(session, dir)
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen: %w", err)
	}
	defer unix.Close(fd)
	if err := lowerDirs(fd, shared, dir); err != nil {
		return err
	}
	for _, kv := range [][2]string{{"upperdir", upper}, {"workdir", work}} {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
	}
	if err := unix.FsconfigSetFlag(fd, "userxattr"); err != nil {
		return fmt.Errorf("userxattr: %w", err)
	}
	// Volatile (Linux 5.10; where it is unknown the mount is made
	// without): its unmount does not sync the upper layer's whole file
	// system, which made every session's end wait for all the writeback
	// pending on that disk, anyone's (docs/sandbox.md#the-cache-layer).
	// What the session wrote is synced when it is committed (cachelayer).
	// Not on an ext4 without a journal (Journalless).
	if volatile {
		unix.FsconfigSetFlag(fd, "volatile")
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("fsmount: %w", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// lowerDirs sets the lower layers, top first: one "lowerdir+" each
// (Linux 6.5), else one "lowerdir" with ':' escaped.
func lowerDirs(fd int, dirs ...string) error {
	if err := unix.FsconfigSetString(fd, "lowerdir+", dirs[0]); err == nil {
		for _, d := range dirs[1:] {
			if err := unix.FsconfigSetString(fd, "lowerdir+", d); err != nil {
				return fmt.Errorf("lowerdir+: %w", err)
			}
		}
		return nil
	}
	esc := make([]string, len(dirs))
	for i, d := range dirs {
		esc[i] = strings.ReplaceAll(strings.ReplaceAll(d, `\`, `\\`), ":", `\:`)
	}
	if err := unix.FsconfigSetString(fd, "lowerdir", strings.Join(esc, ":")); err != nil {
		return fmt.Errorf("lowerdir: %w", err)
	}
	return nil
}
