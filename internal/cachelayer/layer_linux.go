//go:build linux

package cachelayer

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The layer's directory (Root, conch's state directory's cache-layer),
// which commands never see (the init hides conch's state directory once
// the cache mounts are made):
//
//	shared/<key>/          the committed layer of one cache directory:
//	                       the lower layer above the user's own
//	sessions/<id>/<key>/   a session's upper and work directories
//	sessions/<id>.lock     held (flock) by the server while the session lives
//	spare/<id>/<key>/      a committed session's directories, emptied, for
//	                       the next Begin to take whole
//	trash/<id>.<key>       the overlay work directory a spare kept, which
//	                       Begin set aside for its session (ClearLater)
//	commit.lock            held while a session is committed
//
// A session writes into its own upper directory: overlayfs leaves an
// upper directory shared by two live mounts undefined (tried here: a
// lookup cached by one mount made the other's later write fail with
// "Stale file handle"). When the session ends, its upper directory is
// merged into shared/, which the next sessions see.
//
// A committed session's directories (the empty upper and work directory
// of each cache) are kept as a spare, not removed: making them for a
// session and removing them at its end took 4-18 ms of ext4's time here
// (33 directories), on the path of every session's start and end, and
// of every `conch run`.

// maxSpares bounds the spare sessions' directories kept for later Begins.
const maxSpares = 4

// Key names a cache directory in the layer: a hash of its path, and its
// base name for the reader.
func Key(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return hex.EncodeToString(sum[:6]) + "-" + strings.TrimPrefix(filepath.Base(dir), ".")
}

// Shared is the committed layer of cache directory dir under root.
func Shared(root, dir string) string { return filepath.Join(root, "shared", Key(dir)) }

// Upper and Work are a session's overlayfs directories for dir.
func Upper(session, dir string) string { return filepath.Join(session, Key(dir), "upper") }
func Work(session, dir string) string  { return filepath.Join(session, Key(dir), "work") }

// pathFile, beside Upper and Work, holds the cache directory's path:
// commit reads it to tell whether the user's directory holds what a
// session deleted.
const pathFile = "path"

// Prepare makes session's directories for cache directory dir (Upper,
// Work) and records dir's path beside them. A spare's are there already.
func Prepare(session, dir string) error {
	for _, d := range []string{Upper(session, dir), Work(session, dir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	p := filepath.Join(session, Key(dir), pathFile)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	return os.WriteFile(p, []byte(dir), 0o600)
}

// ClearVolatile removes what a volatile overlayfs mount (which
// MountCaches makes) left in the work directory of dir in session (a
// spare's): work/incompat/volatile/dirty, with which overlayfs refuses
// to mount that work directory again ("incompatible feature").
// Overlayfs removes the rest of it at the next mount. Begin sets the
// whole aside already (setAside); this is for a spare it could not.
func ClearVolatile(session, dir string) {
	incompat := filepath.Join(Work(session, dir), "work", "incompat")
	// One look: on the path of every mount, where Begin has almost
	// always set the whole aside (three removals that find nothing
	// were six system calls).
	if _, err := os.Lstat(incompat); errors.Is(err, fs.ErrNotExist) {
		return
	}
	for _, p := range []string{filepath.Join(incompat, "volatile", "dirty"), filepath.Join(incompat, "volatile"), incompat} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			removeAll(incompat)
			return
		}
	}
}

// Session is one session's part of the layer, from Begin to Close.
type Session struct {
	root string
	// Dir is the session's directory, for the init (Upper, Work).
	Dir  string
	lock *os.File
	// ReadyAtClose has Close clear the session's directories' overlay
	// work directories before it keeps them as a spare,
	// instead of the next Begin that takes them: for a server, whose
	// session ends wait for no command.
	ReadyAtClose bool

	trash   []string      // what Begin set aside, for ClearLater or Close
	cleared chan struct{} // closed once ClearLater's removal is done
}

// Begin makes a session's directory under root (made 0700 if needed)
// and holds its lock. Sessions a killed server left behind are committed
// first.
func Begin(root string) (*Session, error) {
	sessions := filepath.Join(root, "sessions")
	if err := os.MkdirAll(sessions, 0o700); err != nil {
		return nil, fmt.Errorf("cache layer: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "shared"), 0o700); err != nil {
		return nil, fmt.Errorf("cache layer: %w", err)
	}
	sweep(root)
	var b [12]byte
	rand.Read(b[:])
	dir := filepath.Join(sessions, hex.EncodeToString(b[:]))
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache layer: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cache layer: lock %s: %w", lock.Name(), err)
	}
	// The boot it was made in: a session that a crash of the machine
	// interrupted is dropped, not committed (sweep).
	lock.WriteString(bootID())
	if !takeSpare(root, dir) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			lock.Close()
			os.Remove(lock.Name())
			return nil, fmt.Errorf("cache layer: %w", err)
		}
		return &Session{root: root, Dir: dir, lock: lock}, nil
	}
	return &Session{root: root, Dir: dir, lock: lock, trash: setAside(root, dir)}, nil
}

// setAside moves the overlay work directory that each cache directory
// of a spare session kept (Work's work: overlayfs's, and a volatile
// mount's leftovers in it) to root's trash, and returns where. A rename
// each: removing them here put ext4's work (on this project's machine,
// a discard of each freed block before the removal returned: 0.6-1 ms)
// on the path of `conch run` before its init's policy could leave;
// ClearLater removes them while the init sets up. With them gone, the
// init's mounts make their own at once. What cannot be moved stays for
// overlayfs to remove (and ClearVolatile).
func setAside(root, session string) []string {
	ents, _ := os.ReadDir(session)
	if len(ents) == 0 {
		return nil
	}
	trash := filepath.Join(root, "trash")
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return nil
	}
	var moved []string
	for _, e := range ents {
		to := filepath.Join(trash, filepath.Base(session)+"."+e.Name())
		if os.Rename(filepath.Join(session, e.Name(), "work", "work"), to) == nil {
			moved = append(moved, to)
		}
	}
	return moved
}

// ClearLater removes, beside the caller's next steps, the work
// directories Begin set aside: call it once the init has its policy
// (nsinit does), so that the removal runs while the init sets up
// instead of before. Close waits for it (or removes them itself when
// ClearLater was not called).
func (s *Session) ClearLater() {
	if len(s.trash) == 0 || s.cleared != nil {
		return
	}
	s.cleared = make(chan struct{})
	go func() {
		defer close(s.cleared)
		removeTrash(s.trash)
	}()
}

func removeTrash(trash []string) {
	for _, t := range trash {
		removeAll(t)
	}
}

// takeSpare moves a spare session's directories to dir, reporting
// whether there was one. The move is one rename: of two servers that
// want the same spare, one gets it and the other tries the next.
func takeSpare(root, dir string) bool {
	spare := filepath.Join(root, "spare")
	ents, _ := os.ReadDir(spare)
	for _, e := range ents {
		if os.Rename(filepath.Join(spare, e.Name()), dir) == nil {
			return true
		}
	}
	return false
}

// Close commits what the session wrote to the shared layer, keeps the
// session's emptied directory as a spare for a later Begin (or removes
// it) and lets its lock go. Call it once the session's
// mounts are gone (its init has exited).
func (s *Session) Close() error {
	if s.cleared != nil {
		<-s.cleared
	} else {
		removeTrash(s.trash)
	}
	err := commit(s.root, s.Dir, s.ReadyAtClose)
	os.Remove(s.lock.Name())
	s.lock.Close()
	return err
}

// sweep commits the sessions under root whose lock no one holds: their
// server died before it could. One made in an earlier boot of the
// machine (a crash) is removed instead.
func sweep(root string) {
	locks, _ := filepath.Glob(filepath.Join(root, "sessions", "*.lock"))
	for _, l := range locks {
		f, err := os.OpenFile(l, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			session := strings.TrimSuffix(l, ".lock")
			// What it set aside and did not remove.
			trash, _ := filepath.Glob(filepath.Join(root, "trash", filepath.Base(session)+".*"))
			removeTrash(trash)
			if b, _ := os.ReadFile(l); len(b) > 0 && string(b) != bootID() {
				// Made before the machine last started: its overlays
				// were never unmounted (which syncs them), so what its
				// commands wrote and did not sync may be torn. None of
				// it is kept.
				removeAll(session)
			} else {
				commit(root, session, false)
			}
			os.Remove(l)
		}
		f.Close()
	}
}

// commit merges each upper directory of session into root's shared
// layer, under root's commit lock, then keeps session's emptied
// directories as a spare (readied for a mount with ready) or removes
// them (keepOrRemove).
func commit(root, session string, ready bool) error {
	lock, err := os.OpenFile(filepath.Join(root, "commit.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("cache layer: commit: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("cache layer: commit: %w", err)
	}
	ents, _ := os.ReadDir(session)
	if wrote(session, ents) {
		// The session's overlays were volatile (but on an ext4 without a
		// journal: sandbox.Journalless), so their unmount synced nothing.
		// What it wrote reaches the disk before the shared layer refers
		// to it, so that a crash cannot leave torn files there; a session
		// that wrote nothing (most) waits for no one's writeback.
		if err := syncFS(root); err != nil {
			return fmt.Errorf("cache layer: commit: %w", err)
		}
	}
	var errs []error
	for _, e := range ents {
		upper := filepath.Join(session, e.Name(), "upper")
		if _, err := os.Lstat(upper); err != nil {
			continue
		}
		dst := filepath.Join(root, "shared", e.Name())
		if err := os.MkdirAll(dst, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		// The user's directory below: "" for a session made before its
		// path was recorded, whose whiteouts are then all kept.
		user, _ := os.ReadFile(filepath.Join(session, e.Name(), pathFile))
		if err := merge(upper, dst, string(user)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := keepOrRemove(root, session, ents, ready); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache layer: commit %s: %w", session, err)
	}
	return nil
}

// wrote reports whether an upper directory of session's caches (ents)
// holds anything.
func wrote(session string, ents []os.DirEntry) bool {
	for _, e := range ents {
		if empty, err := Empty(filepath.Join(session, e.Name(), "upper")); err == nil && !empty {
			return true
		}
	}
	return false
}

// Empty reports whether the directory dir has no entries; err says why
// it could not be read.
func Empty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		return false, err
	}
	return true, nil
}

// syncFS writes out the file system that holds dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// bootID names this boot of the machine ("" where the kernel does not
// say).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// keepOrRemove keeps a committed session's directories as a spare for
// the next Begin, or removes them when maxSpares are kept already (or
// they cannot be emptied). What merge left in an upper directory (the
// whiteouts it applied, the directories it emptied, anything it failed
// to move) is removed first: a spare's upper directories are empty.
// With ready, the overlay work directories go too (setAside, then
// removed); else the Begin that takes the spare sets them aside.
func keepOrRemove(root, session string, ents []os.DirEntry, ready bool) error {
	spare := filepath.Join(root, "spare")
	kept, _ := os.ReadDir(spare)
	if len(kept) < maxSpares && os.MkdirAll(spare, 0o700) == nil {
		emptied := true
		for _, e := range ents {
			upper := filepath.Join(session, e.Name(), "upper")
			if left, err := os.ReadDir(upper); err == nil && len(left) > 0 {
				if removeAll(upper) != nil || os.Mkdir(upper, 0o700) != nil {
					emptied = false
				}
			}
		}
		if emptied {
			if ready {
				// What Begin would set aside, removed now.
				removeTrash(setAside(root, session))
			}
			if os.Rename(session, filepath.Join(spare, filepath.Base(session))) == nil {
				return nil
			}
		}
	}
	return removeAll(session)
}

// merge moves what src (an overlayfs upper directory, or a directory in
// it) holds into dst, the shared layer's directory at the same place:
// a new entry by one rename, a directory present in both entry by entry.
// user is the user's own directory there, which sessions see below dst
// ("": unknown). A whiteout (the session deleted an entry) deletes the
// entry from dst, and stays in dst, hiding the user's, where user holds
// it: the user's own cache is never written. An opaque directory (the
// session removed a directory and made it again) replaces dst's whole,
// and stays opaque, hiding the user's.
func merge(src, dst, user string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		u := ""
		if user != "" {
			u = filepath.Join(user, e.Name())
		}
		fi, err := os.Lstat(s)
		if err != nil {
			continue
		}
		if isWhiteout(fi) {
			errs = append(errs, withWritable(dst, func() error {
				if err := removeAll(d); err != nil {
					return err
				}
				if _, err := os.Lstat(u); err == nil || user == "" {
					return os.Rename(s, d)
				}
				// Nothing below to hide: a whiteout kept where no
				// layer below has the entry is listed as a device in
				// a directory that only the layer holds.
				return nil
			}))
			continue
		}
		di, derr := os.Lstat(d)
		if fi.IsDir() && derr == nil && di.IsDir() && !isOpaque(s) {
			errs = append(errs, withWritable(d, func() error { return merge(s, d, u) }))
			continue
		}
		errs = append(errs, withWritable(dst, func() error {
			if derr == nil && (di.IsDir() || fi.IsDir()) {
				if err := removeAll(d); err != nil {
					return err
				}
			}
			// Moving a directory rewrites its "..": it must be writable
			// for the move (Go's module cache makes its directories
			// read-only).
			if fi.IsDir() && fi.Mode().Perm()&0o200 == 0 {
				if err := os.Chmod(s, fi.Mode().Perm()|0o700); err != nil {
					return err
				}
				defer os.Chmod(d, fi.Mode().Perm())
			}
			return os.Rename(s, d)
		}))
	}
	return errors.Join(errs...)
}

// isWhiteout reports whether fi is an overlayfs whiteout: a character
// device 0/0.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque reports whether dir is an opaque directory of an overlayfs
// mounted with userxattr (MountCaches): its lower layers' entries are
// hidden.
func isOpaque(dir string) bool {
	var b [1]byte
	n, err := unix.Lgetxattr(dir, "user.overlay.opaque", b[:])
	return err == nil && n == 1 && b[0] == 'y'
}

// withWritable runs f with dir made writable by its owner for the time
// of it, if it was not.
func withWritable(dir string, f func() error) error {
	fi, err := os.Lstat(dir)
	if err == nil && fi.IsDir() && fi.Mode().Perm()&0o300 != 0o300 {
		if err := os.Chmod(dir, fi.Mode().Perm()|0o700); err == nil {
			defer os.Chmod(dir, fi.Mode().Perm())
		}
	}
	return f()
}

// removeAll is os.RemoveAll for trees whose directories may not be
// writable or searchable (overlayfs's work directory is mode 0; Go's
// module cache is read-only).
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
