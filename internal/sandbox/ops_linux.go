//go:build linux

package sandbox

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
)

// act is what an operation does to the path it names, as the policy
// sees it.
type act uint8

const (
	actCreate act = iota // a new name: a file, directory, node, link, socket, a rename's destination
	actWrite             // an existing file's content (open for writing, truncate)
	actDelete            // a name removed: unlink, rmdir, a rename's source
	actMeta              // mode, owner, extended attributes
)

// how describes an operation for the policy.
type how struct {
	act     act
	dir     bool // a directory
	rename  bool // a rename's destination or source
	link    bool // a hard link's new name
	symlink bool // a symbolic link's name
	special bool // a FIFO, socket or device node
	exec    bool // the mode it gives has an execute bit
}

// verdict is the policy's answer for one path.
type verdict struct {
	errno    unix.Errno
	denial   *Denial // recorded when the call is denied (or its hook neutralised)
	strip    bool    // create it without execute bits: a hook in a new git directory
	sanitize bool    // a rename onto a git config: install a sanitised copy
	kernel   bool    // protected by the init's mounts: perform it and record a denial if the kernel refuses
}

// isDenial reports whether err is how the kernel refuses an operation on
// a protected path (a read-only mount, a mount point, another mount).
func isDenial(err error) bool {
	switch err {
	case unix.EROFS, unix.EBUSY, unix.EXDEV, unix.EACCES, unix.EPERM:
		return true
	}
	return false
}

// Devices commands may write outside the writable roots, as Restrict's
// Landlock rules allow them.
var (
	deviceFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"}
	deviceDirs  = []string{"/dev/pts", "/dev/shm"}
)

// judge is the policy for an operation on path ("": an object with no
// path, a pipe or a socket, which no file rule concerns).
func (s *Supervisor) judge(path string, h how) verdict {
	if path == "" {
		return verdict{}
	}
	if !within(path, s.plan.Writable) {
		for _, d := range deviceFiles {
			if path == d {
				return verdict{}
			}
		}
		if within(path, deviceDirs) {
			return verdict{}
		}
		v := verdict{errno: unix.EACCES}
		if couldWrite(path) {
			v.denial = &Denial{Path: path, Op: "write", Kind: KindOutside}
		}
		return v
	}
	if within(path, s.plan.Protected) || within(path, s.plan.DenyRead) || slices.Contains(s.plan.Pinned, path) {
		// The init's mounts protect it: the kernel answers.
		return verdict{kernel: true}
	}
	return s.gitJudge(path, h)
}

// couldWrite reports whether the server itself could write path, or
// create it in its nearest existing directory: asked on an ordinary
// thread of the init, with the init's own rights (which are the server's
// user's), not the supervisor's. A write the system would refuse anyway
// (an ordinary user writing /etc) is not the sandbox's denial.
func couldWrite(path string) bool {
	ch := make(chan bool, 1)
	go func() {
		for p := path; ; p = parentOf(p) {
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil {
				ch <- unix.Faccessat(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS) == nil
				return
			}
			if p == "/" {
				ch <- false
				return
			}
		}
	}()
	return <-ch
}

func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// dispatch serves one supervised call.
func (c *call) dispatch(op sysOp) result {
	a := c.uintArg
	switch op {
	case sysOpen:
		return c.open(unix.AT_FDCWD, 0, int(a(1)), a(2))
	case sysOpenat:
		return c.open(c.fdArg(0), 1, int(a(2)), a(3))
	case sysCreat:
		return c.open(unix.AT_FDCWD, 0, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, a(1))
	case sysMkdir:
		return c.mknod(unix.AT_FDCWD, 0, unix.S_IFDIR|a(1)&0o7777, 0)
	case sysMkdirat:
		return c.mknod(c.fdArg(0), 1, unix.S_IFDIR|a(2)&0o7777, 0)
	case sysMknod:
		return c.mknod(unix.AT_FDCWD, 0, a(1), int(a(2)))
	case sysMknodat:
		return c.mknod(c.fdArg(0), 1, a(2), int(a(3)))
	case sysRename:
		return c.rename(unix.AT_FDCWD, 0, unix.AT_FDCWD, 1, 0)
	case sysRenameat:
		return c.rename(c.fdArg(0), 1, c.fdArg(2), 3, 0)
	case sysRenameat2:
		return c.rename(c.fdArg(0), 1, c.fdArg(2), 3, uint(a(4)))
	case sysLink:
		return c.link(unix.AT_FDCWD, 0, unix.AT_FDCWD, 1, 0)
	case sysLinkat:
		return c.link(c.fdArg(0), 1, c.fdArg(2), 3, int(a(4)))
	case sysSymlink:
		return c.symlink(0, unix.AT_FDCWD, 1)
	case sysSymlinkat:
		return c.symlink(0, c.fdArg(1), 2)
	case sysUnlink:
		return c.unlink(unix.AT_FDCWD, 0, 0)
	case sysUnlinkat:
		return c.unlink(c.fdArg(0), 1, int(a(2)))
	case sysRmdir:
		return c.unlink(unix.AT_FDCWD, 0, unix.AT_REMOVEDIR)
	case sysTruncate:
		n := int64(c.n.Data.Args[1])
		if c.abi.compat {
			n = int64(int32(a(1)))
		}
		return c.truncate(n)
	case sysTruncate64:
		lo, hi := a(1), a(2)
		if c.abi.arch == unix.AUDIT_ARCH_ARM {
			lo, hi = a(2), a(3) // a 64-bit argument starts at an even register
		}
		return c.truncate(int64(uint64(hi)<<32 | uint64(lo)))
	case sysChmod:
		return c.chmod(unix.AT_FDCWD, 0, a(1), 0)
	case sysFchmod:
		return c.chmod(c.fdArg(0), -1, a(1), 0)
	case sysFchmodat:
		return c.chmod(c.fdArg(0), 1, a(2), 0)
	case sysFchmodat2:
		return c.chmod(c.fdArg(0), 1, a(2), int(a(3)))
	case sysChown:
		return c.chown(unix.AT_FDCWD, 0, a(1), a(2), 0)
	case sysLchown:
		return c.chown(unix.AT_FDCWD, 0, a(1), a(2), unix.AT_SYMLINK_NOFOLLOW)
	case sysFchown:
		return c.chown(c.fdArg(0), -1, a(1), a(2), 0)
	case sysFchownat:
		return c.chown(c.fdArg(0), 1, a(2), a(3), int(a(4)))
	case sysChown16:
		return c.chown(unix.AT_FDCWD, 0, id16(a(1)), id16(a(2)), 0)
	case sysLchown16:
		return c.chown(unix.AT_FDCWD, 0, id16(a(1)), id16(a(2)), unix.AT_SYMLINK_NOFOLLOW)
	case sysFchown16:
		return c.chown(c.fdArg(0), -1, id16(a(1)), id16(a(2)), 0)
	case sysSetxattr:
		return c.xattr(unix.AT_FDCWD, 0, true, true)
	case sysLsetxattr:
		return c.xattr(unix.AT_FDCWD, 0, false, true)
	case sysFsetxattr:
		return c.xattr(c.fdArg(0), -1, false, true)
	case sysRemovexattr:
		return c.xattr(unix.AT_FDCWD, 0, true, false)
	case sysLremovexattr:
		return c.xattr(unix.AT_FDCWD, 0, false, false)
	case sysFremovexattr:
		return c.xattr(c.fdArg(0), -1, false, false)
	case sysConnect:
		return c.connect(c.fdArg(0), c.arg(1), int(a(2)))
	case sysBind:
		return c.bind(c.fdArg(0), c.arg(1), int(a(2)))
	}
	return result{errno: unix.ENOSYS, fd: -1}
}

// id16 widens a 16-bit id of the compat chown calls (0xffff: unchanged).
func id16(v uint32) uint32 {
	if v&0xffff == 0xffff {
		return ^uint32(0)
	}
	return v & 0xffff
}

// open serves open, openat and creat: the file is opened by the
// supervisor and installed in the caller.
func (c *call) open(dirfd, pathArg, flags int, mode uint32) result {
	path, err := c.path(pathArg)
	if err != nil {
		return fail(err)
	}
	if c.s.notifyReads && flags&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) == 0 {
		return c.read(dirfd, path, flags)
	}
	if r, ok := c.openDevice(path, flags); ok {
		return r
	}
	tmpfile := flags&unix.O_TMPFILE == unix.O_TMPFILE
	follow := flags&unix.O_NOFOLLOW == 0 && !(flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0)
	if tmpfile {
		follow = true
	}
	for attempt := 0; ; attempt++ {
		l, err := c.resolve(dirfd, path, follow, false)
		if err != nil {
			return fail(err)
		}
		if l.obj >= 0 || tmpfile || l.name == "." || l.name == ".." {
			return c.reopen(l, flags, mode, tmpfile)
		}
		var st unix.Stat_t
		exists := unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
		if !exists && flags&unix.O_CREAT == 0 {
			return fail(unix.ENOENT)
		}
		if l.mustDir && (!exists || st.Mode&unix.S_IFMT != unix.S_IFDIR) {
			if flags&unix.O_CREAT != 0 {
				return fail(unix.EISDIR)
			}
			return fail(unix.ENOTDIR)
		}
		if exists && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(5, 0) {
			return c.openTTY(flags)
		}
		// The kernel's own answers come before any permission check:
		// no denial to record.
		if exists && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			return fail(unix.EEXIST)
		}
		if exists && st.Mode&unix.S_IFMT == unix.S_IFDIR && (flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0) {
			return fail(unix.EISDIR)
		}
		h := how{act: actWrite}
		if !exists {
			h = how{act: actCreate, exec: mode&0o111 != 0}
		}
		unlock := c.s.git.guard(at(l))
		v := c.s.judge(l.path, h)
		if v.errno != 0 {
			unlock()
			return c.deny(v.errno, v.denial)
		}
		if v.strip {
			mode &^= 0o111
		}
		var before bool
		if !exists {
			before = c.s.git.likeBefore(l)
			if err := c.umask(); err != nil {
				unlock()
				return fail(err)
			}
		}
		if !c.valid() {
			unlock()
			return callerGone
		}
		oflags := flags | unix.O_NOFOLLOW | unix.O_NOCTTY | unix.O_CLOEXEC
		var fd int
		if exists && st.Mode&unix.S_IFMT == unix.S_IFIFO && flags&unix.O_NONBLOCK == 0 && flags&unix.O_ACCMODE == unix.O_WRONLY {
			unlock()
			fd, err = c.openFIFO(l, oflags)
			unlock = func() {}
		} else {
			fd, err = unix.Openat(l.dir, l.name, oflags, mode)
		}
		if err == unix.ELOOP && follow && attempt < 3 {
			unlock()
			continue // the name became a symbolic link meanwhile: resolve again
		}
		if err != nil {
			unlock()
			if v.kernel && isDenial(err) {
				return c.deny(err.(unix.Errno), &Denial{Path: l.path, Op: "write", Kind: KindProtected})
			}
			return fail(err)
		}
		if v.denial != nil {
			c.s.record(c.tid, *v.denial) // a hook created without its execute bits
		}
		if !exists {
			c.s.afterCreate(c, l, before)
		}
		unlock()
		return result{fd: fd, cloexec: flags&unix.O_CLOEXEC != 0}
	}
}

// openDevice opens /dev/null or /dev/tty named by exactly that path,
// without resolving it: the two a shell opens for writing most (every
// bash opens /dev/tty as it starts; `2>/dev/null`), which the policy lets
// every command write. The full path costs the supervisor about fifteen
// system calls, each dear on a paravirtual machine; this one four or
// five. Like the full path it resolves from the init's root (the
// caller's must be the same) and opens in the init's mount namespace,
// and it opens the name itself, never the caller's memory again. ok is
// false, for the full path to answer, when the name is another, the
// policy says more than "allowed", or the file is not that device.
func (c *call) openDevice(path string, flags int) (r result, ok bool) {
	var dev uint64
	switch path {
	case "/dev/null":
		dev = unix.Mkdev(1, 3)
	case "/dev/tty":
		dev = unix.Mkdev(5, 0)
		// A caller in the init's session has no terminal (openTTY):
		// every bash, as it starts, is answered with one getsid. Its
		// ENXIO opens nothing, so nothing needs judging first.
		if flags&(unix.O_DIRECTORY|unix.O_PATH) == 0 && inInitSession(c.tid) {
			return fail(unix.ENXIO), true
		}
	default:
		return result{}, false
	}
	if flags&(unix.O_DIRECTORY|unix.O_PATH) != 0 || c.s.judge(path, how{act: actWrite}) != (verdict{}) {
		return result{}, false
	}
	if err := c.sameRoot(); err != nil {
		return fail(err), true
	}
	isDev := func(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev }
	var st unix.Stat_t
	if dev == unix.Mkdev(5, 0) {
		if unix.Fstatat(unix.AT_FDCWD, path, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !isDev(&st) {
			return result{}, false
		}
		return c.openCtty(flags), true // its session asked above
	}
	// Opening the null device does nothing a caller gone meanwhile
	// could regret: no check of the notification before it.
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result{}, false
	}
	if unix.Fstat(fd, &st) != nil || !isDev(&st) {
		unix.Close(fd)
		return result{}, false
	}
	return result{fd: fd, cloexec: flags&unix.O_CLOEXEC != 0}, true
}

// reopen opens an object the path led to (a descriptor of the caller
// through /proc, a directory for O_TMPFILE, "." or ".."), after judging
// a write to it.
func (c *call) reopen(l *loc, flags int, mode uint32, tmpfile bool) result {
	obj := l.obj
	if obj < 0 {
		fd, err := unix.Openat(l.dir, l.name, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		obj = c.keep(fd)
		l = &loc{dir: -1, obj: obj, path: fdPath(obj)}
		if !strings.HasPrefix(l.path, "/") {
			l.path = ""
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(5, 0) {
		return c.openTTY(flags)
	}
	h := how{act: actWrite}
	if tmpfile {
		h = how{act: actCreate}
	}
	unlock := c.s.git.guard(pathRef{p: &l.path, obj: obj})
	defer unlock()
	v := c.s.judge(l.path, h)
	if v.errno != 0 {
		return c.deny(v.errno, v.denial)
	}
	if tmpfile {
		if v.strip {
			mode &^= 0o111
		}
		if err := c.umask(); err != nil {
			return fail(err)
		}
	}
	if !c.valid() {
		return callerGone
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(obj), (flags&^(unix.O_CREAT|unix.O_EXCL))|unix.O_NOCTTY|unix.O_CLOEXEC, mode)
	if err != nil {
		if v.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: l.path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	return result{fd: fd, cloexec: flags&unix.O_CLOEXEC != 0}
}

// openTTY opens the caller's controlling terminal, which /dev/tty names
// for whoever opens it (opened by the supervisor it would name the
// init's, which has none).
func (c *call) openTTY(flags int) result {
	// A caller in the init's own session has none: the init gave up the
	// terminal of the session it shares (its leader, outside this PID
	// namespace, reads as session 0 here) before it forked anything,
	// and only a session's leader can take one. Every bash asks as it
	// starts; one getsid answers it, where its stat line takes an open,
	// a read and a close.
	if inInitSession(c.tid) {
		return fail(unix.ENXIO)
	}
	return c.openCtty(flags)
}

// openCtty opens the controlling terminal of a caller outside the init's
// session (openTTY), by its stat line.
func (c *call) openCtty(flags int) result {
	st, err := proc.Stat(c.tid)
	if err != nil {
		return fail(unix.ESRCH)
	}
	nr := st.TTY
	major, minor := (nr>>8)&0xfff, (nr&0xff)|((nr>>12)&0xfff00)
	if nr == 0 || major < 136 || major > 143 {
		return fail(unix.ENXIO) // no terminal, or not a pseudo-terminal's
	}
	if !c.valid() {
		return callerGone
	}
	path := "/dev/pts/" + strconv.Itoa((major-136)<<8|minor)
	fd, err := unix.Open(path, (flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_TRUNC))|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	return result{fd: fd, cloexec: flags&unix.O_CLOEXEC != 0}
}

// inInitSession reports whether thread tid is in the init's session,
// whose leader is outside the PID namespace (its id reads 0).
func inInitSession(tid int) bool {
	sid, err := unix.Getsid(tid)
	return err == nil && sid == 0
}

// openFIFO opens a FIFO for writing, which waits for a reader: without
// blocking, again and again, until a reader comes or the caller is gone
// (a blocked open could not be abandoned), then makes the descriptor
// blocking as the caller asked.
func (c *call) openFIFO(l *loc, flags int) (int, error) {
	delay := time.Millisecond
	for {
		fd, err := unix.Openat(l.dir, l.name, flags|unix.O_NONBLOCK, 0)
		if err == nil {
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			if err == nil {
				unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
			}
			return fd, nil
		}
		if err != unix.ENXIO {
			return -1, err
		}
		if !c.valid() {
			return -1, unix.EINTR
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// mknod serves mkdir, mkdirat, mknod and mknodat (mode holds the type).
func (c *call) mknod(dirfd, pathArg int, mode uint32, dev int) result {
	path, err := c.path(pathArg)
	if err != nil {
		return fail(err)
	}
	l, err := c.resolve(dirfd, path, false, false)
	if err != nil {
		return fail(err)
	}
	if l.obj >= 0 || l.name == "." || l.name == ".." {
		return fail(unix.EEXIST)
	}
	var st unix.Stat_t
	if unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return fail(unix.EEXIST) // the kernel's answer before any check (mkdir -p walks existing parents)
	}
	typ := mode & unix.S_IFMT
	if typ == 0 {
		typ = unix.S_IFREG
	}
	dir := typ == unix.S_IFDIR
	if l.mustDir && !dir {
		return fail(unix.ENOENT)
	}
	unlock := c.s.git.guard(at(l))
	defer unlock()
	v := c.s.judge(l.path, how{act: actCreate, dir: dir, special: typ != unix.S_IFREG && !dir, exec: !dir && mode&0o111 != 0})
	if v.errno != 0 {
		return c.deny(v.errno, v.denial)
	}
	if v.strip {
		mode &^= 0o111
	}
	before := c.s.git.likeBefore(l)
	if err := c.umask(); err != nil {
		return fail(err)
	}
	if !c.valid() {
		return callerGone
	}
	if dir {
		err = unix.Mkdirat(l.dir, l.name, mode&0o7777)
	} else {
		err = unix.Mknodat(l.dir, l.name, mode, dev)
	}
	if err != nil {
		if v.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: l.path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	if v.denial != nil {
		c.s.record(c.tid, *v.denial)
	}
	c.s.afterCreate(c, l, before)
	return ok
}

// rename serves rename, renameat and renameat2.
func (c *call) rename(oldfd, oldArg, newfd, newArg int, flags uint) result {
	oldPath, err := c.path(oldArg)
	if err != nil {
		return fail(err)
	}
	newPath, err := c.path(newArg)
	if err != nil {
		return fail(err)
	}
	from, err := c.resolve(oldfd, oldPath, false, false)
	if err != nil {
		return fail(err)
	}
	to, err := c.resolve(newfd, newPath, false, false)
	if err != nil {
		return fail(err)
	}
	if from.obj >= 0 || to.obj >= 0 {
		return fail(unix.EXDEV)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(from.dir, from.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	var tst unix.Stat_t
	toExists := unix.Fstatat(to.dir, to.name, &tst, unix.AT_SYMLINK_NOFOLLOW) == nil
	unlock := c.s.git.guard(at(from), at(to))
	defer unlock()
	vFrom := c.s.judge(from.path, how{act: actDelete, dir: dir, rename: true})
	if vFrom.errno != 0 {
		return c.deny(vFrom.errno, vFrom.denial)
	}
	vTo := c.s.judge(to.path, how{act: actCreate, dir: dir, rename: true, symlink: st.Mode&unix.S_IFMT == unix.S_IFLNK})
	if flags&unix.RENAME_EXCHANGE != 0 {
		// Both names get a new file: each side is a destination.
		vBack := c.s.judge(from.path, how{act: actCreate, dir: toExists && tst.Mode&unix.S_IFMT == unix.S_IFDIR, rename: true})
		if vBack.errno != 0 || vBack.sanitize {
			return c.deny(unix.EROFS, firstDenial(vBack.denial, &Denial{Path: from.path, Op: "write", Kind: KindProtected}))
		}
		if vTo.sanitize {
			return c.deny(unix.EROFS, &Denial{Path: to.path, Op: "write", Kind: KindProtected})
		}
	}
	if vTo.errno != 0 {
		return c.deny(vTo.errno, vTo.denial)
	}
	if vTo.sanitize {
		if flags&unix.RENAME_NOREPLACE != 0 && toExists {
			return fail(unix.EEXIST)
		}
		if !c.valid() {
			return callerGone
		}
		return c.installConfig(from, to)
	}
	before := c.s.git.likeBefore(to)
	if !c.valid() {
		return callerGone
	}
	if err := unix.Renameat2(from.dir, from.name, to.dir, to.name, flags); err != nil {
		if (vFrom.kernel || vTo.kernel) && isDenial(err) {
			p := to.path
			if vFrom.kernel {
				p = from.path
			}
			return c.deny(err.(unix.Errno), &Denial{Path: p, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	c.s.afterCreate(c, to, before)
	return ok
}

func firstDenial(ds ...*Denial) *Denial {
	for _, d := range ds {
		if d != nil {
			return d
		}
	}
	return nil
}

// link serves link and linkat.
func (c *call) link(oldfd, oldArg, newfd, newArg, flags int) result {
	oldPath, err := c.path(oldArg)
	if err != nil {
		return fail(err)
	}
	newPath, err := c.path(newArg)
	if err != nil {
		return fail(err)
	}
	from, err := c.resolve(oldfd, oldPath, flags&unix.AT_SYMLINK_FOLLOW != 0, flags&unix.AT_EMPTY_PATH != 0)
	if err != nil {
		return fail(err)
	}
	to, err := c.resolve(newfd, newPath, false, false)
	if err != nil {
		return fail(err)
	}
	var tst unix.Stat_t
	if to.obj >= 0 || to.name == "." || to.name == ".." || unix.Fstatat(to.dir, to.name, &tst, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return fail(unix.EEXIST)
	}
	obj, err := c.object(from)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fail(unix.EPERM)
	}
	fromPath := from.path
	if from.obj < 0 {
		fromPath = fdPath(obj)
	}
	unlock := c.s.git.guard(pathRef{p: &fromPath, obj: obj}, at(to))
	defer unlock()
	// A new name for a file is a new way to write it: the file must be
	// one the command may write, and not a protected one.
	if vFrom := c.s.judge(fromPath, how{act: actWrite}); vFrom.errno != 0 || vFrom.strip || vFrom.sanitize {
		errno, d := vFrom.errno, vFrom.denial
		if errno == unix.EACCES {
			// As Landlock refuses a link out of a read-only tree, and
			// not recorded: nothing outside was written, and programs
			// copy instead (git clone of a local repository does).
			errno, d = unix.EXDEV, nil
		}
		if errno == 0 {
			errno = unix.EROFS
		}
		return c.deny(errno, d)
	} else if vFrom.kernel {
		return c.deny(unix.EXDEV, &Denial{Path: fromPath, Op: "write", Kind: KindProtected})
	}
	vTo := c.s.judge(to.path, how{act: actCreate, link: true, exec: st.Mode&0o111 != 0})
	if vTo.errno != 0 || vTo.sanitize || vTo.strip {
		errno := vTo.errno
		if errno == 0 {
			errno = unix.EROFS
		}
		return c.deny(errno, firstDenial(vTo.denial, &Denial{Path: to.path, Op: "write", Kind: KindProtected}))
	}
	before := c.s.git.likeBefore(to)
	if !c.valid() {
		return callerGone
	}
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(obj), to.dir, to.name, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		if vTo.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: to.path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	c.s.afterCreate(c, to, before)
	return ok
}

// symlink serves symlink and symlinkat.
func (c *call) symlink(targetArg, newfd, newArg int) result {
	target, err := c.path(targetArg)
	if err != nil {
		return fail(err)
	}
	if target == "" {
		return fail(unix.ENOENT)
	}
	newPath, err := c.path(newArg)
	if err != nil {
		return fail(err)
	}
	l, err := c.resolve(newfd, newPath, false, false)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if l.obj >= 0 || l.name == "." || l.name == ".." || unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return fail(unix.EEXIST)
	}
	unlock := c.s.git.guard(at(l))
	defer unlock()
	v := c.s.judge(l.path, how{act: actCreate, symlink: true})
	if v.errno != 0 || v.sanitize || v.strip {
		errno := v.errno
		if errno == 0 {
			errno = unix.EROFS
		}
		return c.deny(errno, firstDenial(v.denial, &Denial{Path: l.path, Op: "write", Kind: KindProtected}))
	}
	before := c.s.git.likeBefore(l)
	if !c.valid() {
		return callerGone
	}
	if err := unix.Symlinkat(target, l.dir, l.name); err != nil {
		if v.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: l.path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	c.s.afterCreate(c, l, before)
	return ok
}

// unlink serves unlink, unlinkat and rmdir.
func (c *call) unlink(dirfd, pathArg, flags int) result {
	path, err := c.path(pathArg)
	if err != nil {
		return fail(err)
	}
	l, err := c.resolve(dirfd, path, false, false)
	if err != nil {
		return fail(err)
	}
	if l.obj >= 0 {
		return fail(unix.EBUSY)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	unlock := c.s.git.guard(at(l))
	defer unlock()
	v := c.s.judge(l.path, how{act: actDelete, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	if v.errno != 0 {
		return c.deny(v.errno, v.denial)
	}
	if v.kernel && flags&unix.AT_REMOVEDIR != 0 && !emptyDir(l.dir, l.name) {
		// A mount point (a pinned git directory) refuses with EBUSY
		// before the file system would with ENOTEMPTY: answer as the
		// system would without the sandbox, and record nothing.
		return fail(unix.ENOTEMPTY)
	}
	if !c.valid() {
		return callerGone
	}
	name := l.name
	if l.mustDir {
		name += "/"
	}
	if err := unix.Unlinkat(l.dir, name, flags&unix.AT_REMOVEDIR); err != nil {
		if v.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: l.path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	return ok
}

// truncate serves truncate and truncate64.
func (c *call) truncate(length int64) result {
	path, err := c.path(0)
	if err != nil {
		return fail(err)
	}
	l, err := c.resolve(unix.AT_FDCWD, path, true, false)
	if err != nil {
		return fail(err)
	}
	return c.onObject(l, how{act: actWrite}, func(p string) error { return unix.Truncate(p, length) })
}

// onObject judges an operation on the object l names, then performs it
// through p, a path of the supervisor's that names exactly that object
// (/proc/self/fd/N of an O_PATH descriptor), whatever the caller does to
// its own path meanwhile.
func (c *call) onObject(l *loc, h how, do func(p string) error) result {
	obj, err := c.object(l)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return fail(err)
	}
	path := l.path
	if l.obj < 0 && st.Mode&unix.S_IFMT != unix.S_IFLNK {
		// The name may have been replaced since it was resolved.
		path = fdPath(obj)
	}
	h.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	ref := pathRef{p: &path, obj: obj}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		ref = pathRef{p: &path, dir: l.dir, name: l.name, obj: -1}
	}
	unlock := c.s.git.guard(ref)
	defer unlock()
	v := c.s.judge(path, h)
	if v.errno != 0 || v.strip {
		if v.errno == 0 {
			v.errno = unix.EROFS
		}
		return c.deny(v.errno, v.denial)
	}
	if !c.valid() {
		return callerGone
	}
	if err := do("/proc/self/fd/" + strconv.Itoa(obj)); err != nil {
		if v.kernel && isDenial(err) {
			return c.deny(err.(unix.Errno), &Denial{Path: path, Op: "write", Kind: KindProtected})
		}
		return fail(err)
	}
	return ok
}

// target resolves the object of a metadata call: argument pathArg of
// the caller (-1: the descriptor dirfd itself, as fchmod's).
func (c *call) target(dirfd, pathArg, flags int) (*loc, error) {
	if pathArg < 0 {
		return c.fdObject(dirfd)
	}
	path, err := c.path(pathArg)
	if err != nil {
		return nil, err
	}
	return c.resolve(dirfd, path, flags&unix.AT_SYMLINK_NOFOLLOW == 0, flags&unix.AT_EMPTY_PATH != 0)
}

// chmod serves chmod, fchmod, fchmodat and fchmodat2.
func (c *call) chmod(dirfd, pathArg int, mode uint32, flags int) result {
	l, err := c.target(dirfd, pathArg, flags)
	if err != nil {
		return fail(err)
	}
	obj, err := c.object(l)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fail(unix.EOPNOTSUPP) // the mode of a symbolic link cannot change
	}
	return c.onObject(l, how{act: actMeta, exec: mode&0o111 != 0 && st.Mode&0o111 != mode&0o111}, func(p string) error {
		return unix.Fchmodat(unix.AT_FDCWD, p, mode&0o7777, 0)
	})
}

// chown serves the chown calls.
func (c *call) chown(dirfd, pathArg int, uid, gid uint32, flags int) result {
	l, err := c.target(dirfd, pathArg, flags)
	if err != nil {
		return fail(err)
	}
	obj, err := c.object(l)
	if err != nil {
		return fail(err)
	}
	return c.onObject(l, how{act: actMeta}, func(string) error {
		return unix.Fchownat(obj, "", int(int32(uid)), int(int32(gid)), unix.AT_EMPTY_PATH)
	})
}

// xattr serves setxattr and removexattr, their l- and f- forms.
func (c *call) xattr(dirfd, pathArg int, follow, set bool) result {
	flags := 0
	if !follow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	nameArg, valueArg, sizeArg, flagsArg := 1, 2, 3, 4
	l, err := c.target(dirfd, pathArg, flags)
	if err != nil {
		return fail(err)
	}
	name, err := c.readString(c.arg(nameArg), xattrNameMax)
	if err == unix.ENAMETOOLONG {
		err = unix.ERANGE
	}
	if err != nil {
		return fail(err)
	}
	var value []byte
	var xflags int
	if set {
		size := int(c.uintArg(sizeArg))
		if size > xattrSizeMax {
			return fail(unix.E2BIG)
		}
		if value, err = c.readBytes(c.arg(valueArg), size); err != nil {
			return fail(err)
		}
		xflags = int(c.uintArg(flagsArg))
	}
	obj, err := c.object(l)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		// Only trusted and security attributes may sit on a symbolic
		// link, which need capabilities a command has not.
		return fail(unix.EPERM)
	}
	return c.onObject(l, how{act: actMeta}, func(p string) error {
		if set {
			return unix.Setxattr(p, name, value, xflags)
		}
		return unix.Removexattr(p, name)
	})
}

// read serves an open for reading when the plan hides paths (deny_read):
// it records a read of a hidden path (whose mount shows it empty) and
// lets the kernel open it, reading the caller's memory again: for a
// read, what was checked only decides what is recorded.
func (c *call) read(dirfd int, path string, flags int) result {
	l, err := c.resolve(dirfd, path, flags&unix.O_NOFOLLOW == 0, false)
	if err == nil && l.path != "" && within(l.path, c.s.plan.DenyRead) {
		c.s.record(c.tid, Denial{Path: l.path, Op: "read", Kind: KindRead})
	}
	return cont
}

// emptyDir reports whether dir's entry name is a directory with no entry
// but . and ..
func emptyDir(dir int, name string) bool {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	return err == nil && len(names) == 0
}

// Limits of extended attributes (linux/limits.h).
const (
	xattrNameMax = 255
	xattrSizeMax = 65536
)
