//go:build linux

package sandbox

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// loc is where a path of the caller leads, resolved by the supervisor
// as the kernel would for the caller: the directory that holds its last
// component (an O_PATH descriptor of ours, which no later change of the
// caller's memory or of the path's directories can move), or, when the
// path ended at a descriptor of the caller (a procfs magic link such as
// /dev/stdout, or an empty path with AT_EMPTY_PATH), that object.
type loc struct {
	dir     int    // -1 when obj is set
	name    string // the last component: one name, or "." or ".."
	obj     int    // -1, or the object itself (O_PATH)
	path    string // the absolute path as the init sees it; "" for an object with none (a pipe, a socket)
	mustDir bool   // the path ended with a slash
}

// maxLinks bounds the symbolic links one resolution follows, as the
// kernel's (ELOOP).
const maxLinks = 40

// errSlow sends a resolution to the component walker.
var errSlow = errors.New("resolve component by component")

// resolve resolves path of the caller, relative to its descriptor dirfd
// (AT_FDCWD: its working directory): every symbolic link followed but
// the last component's unless follow (a trailing slash follows it too).
// An empty path is the object dirfd names when emptyOK (AT_EMPTY_PATH),
// else ENOENT.
func (c *call) resolve(dirfd int, path string, follow, emptyOK bool) (*loc, error) {
	if path == "" {
		if !emptyOK {
			return nil, unix.ENOENT
		}
		return c.fdObject(dirfd)
	}
	base := unix.AT_FDCWD
	if path[0] == '/' {
		if err := c.sameRoot(); err != nil {
			return nil, err
		}
	} else {
		b, err := c.dirBase(dirfd)
		if err != nil {
			return nil, err
		}
		base = b
	}
	l, err := c.resolveFast(base, path, follow)
	if err == errSlow {
		return c.walk(base, path, follow)
	}
	return l, err
}

// resolveFast lets the kernel resolve the directory part (no magic link
// allowed), and follows the last component's symbolic links itself. A
// path that reaches procfs, where "self" would name the init and magic
// links lead to descriptors, is the walker's.
func (c *call) resolveFast(base int, path string, follow bool) (*loc, error) {
	for links := 0; ; {
		dirPart, name, trailing := splitLast(path)
		dir := base
		if dirPart != "" {
			fd, err := unix.Openat2(base, dirPart, &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_NO_MAGICLINKS,
			})
			if err == unix.ELOOP {
				return nil, errSlow
			}
			if err != nil {
				return nil, err
			}
			dir = c.keep(fd)
		}
		if onProc(dir) {
			return nil, errSlow
		}
		if (follow || trailing) && name != "." && name != ".." {
			var st unix.Stat_t
			if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if links++; links > maxLinks {
					return nil, unix.ELOOP
				}
				target, err := readlinkat(dir, name)
				if err != nil {
					return nil, err
				}
				if target == "" {
					return nil, unix.ENOENT
				}
				base = dir
				if target[0] == '/' {
					base = unix.AT_FDCWD
				}
				path = target
				if trailing {
					path += "/"
				}
				continue
			}
		}
		return &loc{dir: dir, name: name, obj: -1, path: joinPath(fdPath(dir), name), mustDir: trailing}, nil
	}
}

// walk resolves path from base one component at a time. In procfs,
// "self" and "thread-self" name the caller (not the init), no process
// but the caller's may be entered, and the magic links of the caller's
// own entries (fd/N, cwd, root) are followed by the kernel: they lead to
// what the caller holds.
func (c *call) walk(base int, path string, follow bool) (*loc, error) {
	st, err := c.procStatus()
	if err != nil {
		return nil, err
	}
	comps, trailing := components(path)
	cur := base
	if path[0] == '/' {
		fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		cur = c.keep(fd)
	} else if cur == unix.AT_FDCWD {
		return nil, unix.EBADF
	}
	links := 0
	for len(comps) > 0 {
		comp := comps[0]
		comps = comps[1:]
		last := len(comps) == 0
		if last && (comp == "." || comp == "..") {
			return &loc{dir: cur, name: comp, obj: -1, path: joinPath(fdPath(cur), comp), mustDir: trailing}, nil
		}
		if comp == "." {
			continue
		}
		if comp == ".." {
			fd, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, err
			}
			cur = c.keep(fd)
			continue
		}
		proc := onProc(cur)
		if proc && isProcRoot(cur) {
			switch comp {
			case "self":
				comps = append([]string{strconv.Itoa(st.tgid)}, comps...)
				continue
			case "thread-self":
				comps = append([]string{strconv.Itoa(st.tgid), "task", strconv.Itoa(c.tid)}, comps...)
				continue
			}
			if n, err := strconv.Atoi(comp); err == nil && !c.ownPid(st.tgid, n) {
				// Another process's entries: the caller could reach
				// them only with ptrace rights over it, which the
				// init has over everything.
				return nil, unix.EACCES
			}
		}
		fd, err := unix.Openat(cur, comp, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT && last {
			return &loc{dir: cur, name: comp, obj: -1, path: joinPath(fdPath(cur), comp), mustDir: trailing}, nil
		}
		if err != nil {
			return nil, err
		}
		next := c.keep(fd)
		var fst unix.Stat_t
		if err := unix.Fstat(next, &fst); err != nil {
			return nil, err
		}
		switch fst.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if last && !follow && !trailing {
				return &loc{dir: cur, name: comp, obj: -1, path: joinPath(fdPath(cur), comp)}, nil
			}
			if links++; links > maxLinks {
				return nil, unix.ELOOP
			}
			if proc && !isProcRoot(cur) {
				// A magic link of the caller's own entry.
				fd, err := unix.Openat(cur, comp, unix.O_PATH|unix.O_CLOEXEC, 0)
				if err != nil {
					return nil, err
				}
				obj := c.keep(fd)
				if last {
					p := fdPath(obj)
					if !strings.HasPrefix(p, "/") {
						p = ""
					}
					return &loc{dir: -1, obj: obj, path: p, mustDir: trailing}, nil
				}
				if !isDir(obj) {
					return nil, unix.ENOTDIR
				}
				cur = obj
				continue
			}
			target, err := readlinkat(next, "")
			if err != nil {
				return nil, err
			}
			if target == "" {
				return nil, unix.ENOENT
			}
			if proc {
				// /proc's own links (mounts → self/mounts).
				if t, ok := strings.CutPrefix(target, "self"); ok && (t == "" || t[0] == '/') {
					target = strconv.Itoa(st.tgid) + t
				}
			}
			more, _ := components(target)
			comps = append(more, comps...)
			if last && trailing {
				trailing = true
			}
			if target[0] == '/' {
				fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return nil, err
				}
				cur = c.keep(fd)
			}
			if len(comps) == 0 {
				comps = []string{"."}
			}
		default:
			if last {
				return &loc{dir: cur, name: comp, obj: -1, path: joinPath(fdPath(cur), comp), mustDir: trailing}, nil
			}
			if fst.Mode&unix.S_IFMT != unix.S_IFDIR {
				return nil, unix.ENOTDIR
			}
			cur = next
		}
	}
	return &loc{dir: cur, name: ".", obj: -1, path: fdPath(cur), mustDir: trailing}, nil
}

// ownPid reports whether n is the caller's process or one of its
// threads.
func (c *call) ownPid(tgid, n int) bool {
	if n == tgid {
		return true
	}
	return unix.Access("/proc/"+strconv.Itoa(tgid)+"/task/"+strconv.Itoa(n), unix.F_OK) == nil
}

// sameRoot fails with EPERM when the caller's root is not the init's (it
// chrooted, in a user namespace of its own): the supervisor resolves
// absolute paths from the init's root.
func (c *call) sameRoot() error {
	b := make([]byte, 8)
	p := "/proc/" + strconv.Itoa(c.tid) + "/root"
	n, err := unix.Readlink(p, b)
	if err == unix.EACCES || err == unix.EPERM {
		c.withPtrace(func() { n, err = unix.Readlink(p, b) })
	}
	if err != nil {
		return unix.ESRCH
	}
	if string(b[:n]) != "/" {
		return unix.EPERM
	}
	return nil
}

// dirBase opens the directory the caller's dirfd names (its working
// directory for AT_FDCWD).
func (c *call) dirBase(dirfd int) (int, error) {
	if dirfd == unix.AT_FDCWD {
		if c.cwd < 0 {
			fd, err := c.procOpen("cwd", unix.O_PATH|unix.O_DIRECTORY)
			if err != nil {
				return -1, unix.ENOENT
			}
			c.cwd = fd
		}
		return c.cwd, nil
	}
	if dirfd < 0 {
		return -1, unix.EBADF
	}
	fd, err := c.procOpen("fd/"+strconv.Itoa(dirfd), unix.O_PATH|unix.O_DIRECTORY)
	if err == unix.ENOENT {
		return -1, unix.EBADF
	}
	return fd, err
}

// fdObject is the object the caller's descriptor dirfd names.
func (c *call) fdObject(dirfd int) (*loc, error) {
	var obj int
	var err error
	if dirfd == unix.AT_FDCWD {
		obj, err = c.dirBase(dirfd)
	} else if dirfd < 0 {
		err = unix.EBADF
	} else {
		obj, err = c.procOpen("fd/"+strconv.Itoa(dirfd), unix.O_PATH)
		if err == unix.ENOENT {
			err = unix.EBADF
		}
	}
	if err != nil {
		return nil, err
	}
	p := fdPath(obj)
	if !strings.HasPrefix(p, "/") {
		p = ""
	}
	return &loc{dir: -1, obj: obj, path: p}, nil
}

// object opens l's object itself (O_PATH, the last symbolic link not
// followed: l was resolved with the follow its call asked).
func (c *call) object(l *loc) (int, error) {
	if l.obj >= 0 {
		return l.obj, nil
	}
	fd, err := unix.Openat(l.dir, l.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	return c.keep(fd), nil
}

// splitLast splits path into its directory part ("" for none, "/" for
// the root) and last component, and says whether it ended with a slash.
func splitLast(path string) (dir, name string, trailing bool) {
	p := strings.TrimRight(path, "/")
	if p == "" {
		return "/", ".", false
	}
	trailing = len(p) < len(path)
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p, trailing
	}
	dir = p[:i]
	if dir == "" {
		dir = "/"
	}
	return dir, p[i+1:], trailing
}

// components splits path into its non-empty components.
func components(path string) (comps []string, trailing bool) {
	for c := range strings.SplitSeq(path, "/") {
		if c != "" {
			comps = append(comps, c)
		}
	}
	return comps, strings.HasSuffix(path, "/") && len(comps) > 0
}

// joinPath joins a directory's path and a name into a clean path.
func joinPath(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// fdPath is the path of one of our descriptors, as /proc/self/fd says
// (for an object outside the file tree, such as a pipe, a socket or a
// memfd, something that does not start with /, or "").
func fdPath(fd int) string {
	b := make([]byte, unix.PathMax)
	n, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), b)
	if err != nil {
		return ""
	}
	p := string(b[:n])
	if strings.HasPrefix(p, "/memfd:") {
		return ""
	}
	return p
}

// readlinkat reads a symbolic link.
func readlinkat(dir int, name string) (string, error) {
	b := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}

// onProc reports whether fd lies on a procfs.
func onProc(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// isProcRoot reports whether fd, on a procfs, is its root.
func isProcRoot(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Ino == 1
}

func isDir(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// devIno names a file for as long as it exists.
type devIno struct{ dev, ino uint64 }

func devInoOf(st *unix.Stat_t) devIno { return devIno{uint64(st.Dev), st.Ino} }
