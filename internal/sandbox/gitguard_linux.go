//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The git guard (docs/sandbox.md#git) keeps every git directory under
// the writable roots, at any depth, from making git run code or read
// configuration from elsewhere when the user runs git there later,
// outside conch.
//
// A directory is a git directory when it is named .git, holds HEAD, or
// holds objects and refs (a common directory). One that existed before
// the session is protected: nothing may create, write, replace or
// remove its config, config.worktree, commondir, gitdir, hooks, info,
// objects/info/alternates, nor those of its modules/* and worktrees/*
// git directories, whether they exist yet or not. One born during the
// session (git init, clone, worktree add, submodule add, a bare
// repository, a directory made to look like one) is checked when it is
// born, under the guard's lock: its config and config.worktree are
// replaced by copies keeping only the keys of gitKeepKeys (a fresh file,
// so that no descriptor a command still holds writes it), and each of
// its hooks loses its execute bits (a *.sample hook never runs). After
// that, its config may only be replaced by a rename (git's own way:
// config.lock) of a file that adds no such key, which installs a fresh
// copy; a hook may be created only without execute bits, never made
// executable, linked or renamed into place.

// gitState is what the guard knows of the session's git directories.
type gitState struct {
	// rw orders the supervised operations: each holds it shared from
	// its judgement to its end, and exclusively when its path concerns
	// the guard (sensitive), so that no operation is judged on a place
	// an exclusive one (a rename into a git directory, a birth and its
	// sweep) changes meanwhile.
	rw    sync.RWMutex
	dirs  map[devIno]bool // git directories born during the session
	files map[devIno]bool // .git files created during the session
}

func (g *gitState) init() {
	g.dirs = make(map[devIno]bool)
	g.files = make(map[devIno]bool)
}

// pathRef is a path an operation is judged on, which the guard reads
// again under its lock from what the operation will act on: a directory
// descriptor and a name, or the object's descriptor.
type pathRef struct {
	p    *string
	dir  int
	name string
	obj  int
}

// at is the pathRef of l.
func at(l *loc) pathRef { return pathRef{p: &l.path, dir: l.dir, name: l.name, obj: l.obj} }

// guard takes the guard's lock for an operation on refs, shared, or
// exclusive when one of refs, read again under the lock, is sensitive
// (its directory may have moved since it was resolved). It returns the
// unlock.
func (g *gitState) guard(refs ...pathRef) func() {
	refresh := func() bool {
		sens := false
		for _, r := range refs {
			if r.p == nil || *r.p == "" {
				continue
			}
			var fresh string
			if r.obj >= 0 {
				fresh = fdPath(r.obj)
			} else if d := fdPath(r.dir); d != "" {
				fresh = joinPath(d, r.name)
			}
			if strings.HasPrefix(fresh, "/") {
				*r.p = fresh
			}
			if sensitive(*r.p) {
				sens = true
			}
		}
		return sens
	}
	g.rw.RLock()
	if !refresh() {
		return g.rw.RUnlock
	}
	g.rw.RUnlock()
	g.rw.Lock()
	refresh()
	return g.rw.Unlock
}

// isGitDirLike reports whether dir is, or looks like, a git directory.
func isGitDirLike(dir string) bool {
	var st unix.Stat_t
	if filepath.Base(dir) == ".git" {
		return unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	if unix.Lstat(dir+"/HEAD", &st) == nil {
		return true
	}
	return unix.Lstat(dir+"/objects", &st) == nil && unix.Lstat(dir+"/refs", &st) == nil
}

// birthNames are the names whose creation can make their directory a
// git directory.
func birthName(name string) bool { return name == "HEAD" || name == "objects" || name == "refs" }

// likeBefore reports, for an operation about to create l, whether l's
// directory already looked like a git directory (so that creating l
// cannot be its birth).
func (g *gitState) likeBefore(l *loc) bool {
	if l.dir < 0 || !birthName(l.name) {
		return true
	}
	return isGitDirLike(parentOf(l.path))
}

// isNew reports whether the git directory dir was born in this session.
func (s *Supervisor) isNew(dir string) bool {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return false
	}
	return s.git.dirs[devInoOf(&st)]
}

// gitFirst are the names that start a protected path below a git
// directory.
var gitFirst = map[string]bool{
	"config": true, "config.worktree": true, "commondir": true, "gitdir": true,
	"hooks": true, "info": true, "objects": true, "modules": true, "worktrees": true,
}

// gitJudge is the guard's verdict on an operation on path, inside the
// writable roots. The lock of guard is held, exclusively when path is
// sensitive.
func (s *Supervisor) gitJudge(path string, h how) verdict {
	if !sensitive(path) {
		return verdict{}
	}
	comps := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := len(comps) - 1; i >= 1; i-- {
		if !gitFirst[comps[i]] {
			continue
		}
		dir := "/" + strings.Join(comps[:i], "/")
		if isGitDirLike(dir) {
			return s.gitRule(dir, comps[i:], path, h)
		}
	}
	if comps[len(comps)-1] == ".git" {
		return s.gitFileRule(path, h)
	}
	return verdict{}
}

// gitRule judges an operation on path, rel below the git directory dir.
func (s *Supervisor) gitRule(dir string, rel []string, path string, h how) verdict {
	isNew := s.isNew(dir)
	deny := verdict{errno: unix.EROFS, denial: &Denial{Path: path, Op: "write", Kind: KindProtected}}
	allow := verdict{}
	switch rel[0] {
	case "config", "config.worktree":
		if !isNew || len(rel) > 1 {
			return deny
		}
		switch h.act {
		case actDelete, actMeta:
			return allow
		case actCreate:
			if h.rename && !h.dir && !h.symlink {
				return verdict{sanitize: true}
			}
		}
		return deny
	case "commondir", "gitdir", "info":
		if isNew {
			return allow
		}
		return deny
	case "hooks":
		if !isNew {
			return deny
		}
		if len(rel) == 1 {
			switch {
			case h.act == actCreate && h.dir && !h.rename, h.act == actDelete, h.act == actMeta:
				return allow
			}
			return deny
		}
		if len(rel) > 2 || strings.HasSuffix(rel[1], ".sample") {
			return allow // git runs neither a sample nor what lies deeper
		}
		switch h.act {
		case actCreate:
			if h.rename || h.link || h.symlink {
				return deny
			}
			if h.exec && !h.dir && !h.special {
				return verdict{strip: true, denial: deny.denial}
			}
		case actMeta:
			if h.exec {
				return deny
			}
		}
		return allow
	case "objects":
		if len(rel) == 3 && rel[1] == "info" && (rel[2] == "alternates" || rel[2] == "http-alternates") && !isNew {
			return deny
		}
		return allow
	case "modules", "worktrees":
		if len(rel) <= 2 {
			return allow
		}
		if sub := dir + "/" + rel[0] + "/" + rel[1]; isGitDirLike(sub) {
			return s.gitRule(sub, rel[2:], path, h)
		}
		return allow // not a git directory yet: checked at its birth
	}
	return allow
}

// gitFileRule judges an operation on a .git entry of a working tree: a
// .git file (gitdir: <path>) that existed before the session cannot be
// written or replaced; a new one, a .git directory or symbolic link
// may be made (a directory is a git directory born then).
func (s *Supervisor) gitFileRule(path string, h how) verdict {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return verdict{}
	}
	if s.git.files[devInoOf(&st)] || h.act == actDelete {
		return verdict{}
	}
	return verdict{errno: unix.EROFS, denial: &Denial{Path: path, Op: "write", Kind: KindProtected}}
}

// afterCreate follows an operation that made l: a .git directory, or a
// directory that now looks like a git directory and did not before (as
// before says), is born: it is checked (sweep) and known as the
// session's; a .git file is known as the session's. The guard's lock is
// held, exclusively when l is sensitive.
func (s *Supervisor) afterCreate(c *call, l *loc, before bool) {
	if l.dir < 0 || l.path == "" {
		return
	}
	switch {
	case l.name == ".git":
		var st unix.Stat_t
		if unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			s.git.files[devInoOf(&st)] = true
		case unix.S_IFDIR:
			if !s.git.dirs[devInoOf(&st)] && !(before && isGitDirLike(l.path) && hasGitShape(l.path)) {
				s.born(c, l.path)
			}
		}
	case !before && birthName(l.name):
		if dir := parentOf(l.path); isGitDirLike(dir) {
			s.born(c, dir)
		}
	}
}

// hasGitShape reports whether dir holds what git needs (a renamed git
// directory of before the session keeps its standing: nothing was
// written in it).
func hasGitShape(dir string) bool {
	var st unix.Stat_t
	return unix.Lstat(dir+"/HEAD", &st) == nil && unix.Lstat(dir+"/objects", &st) == nil
}

// born makes dir a git directory of the session and checks it.
func (s *Supervisor) born(c *call, dir string) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return
	}
	s.git.dirs[devInoOf(&st)] = true
	for _, name := range []string{"config", "config.worktree"} {
		s.sanitizeConfig(c, fd, dir, name)
	}
	s.neutraliseHooks(c, fd, dir)
}

// maxConfig bounds the git configuration the guard reads.
const maxConfig = 4 << 20

// keepFor is the sanitiser's rule for the git directory dir: the keys of
// gitKeepKeys, and core.worktree when it names a directory inside the
// writable roots (a submodule's git directory names its checkout).
func (s *Supervisor) keepFor(dir string) func(gitEntry) bool {
	return func(e gitEntry) bool {
		if !e.hasSub && e.section == "core" && e.key == "worktree" {
			p := e.value
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			return within(resolved(p), s.plan.Writable)
		}
		return e.keptByDefault()
	}
}

// sanitizeConfig replaces dir's config file name by a fresh, sanitised
// copy; a symbolic link or anything but a regular file there is
// removed. Each change is recorded for c's caller.
func (s *Supervisor) sanitizeConfig(c *call, dfd int, dir, name string) {
	path := dir + "/" + name
	var st unix.Stat_t
	if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxConfig {
		if unix.Unlinkat(dfd, name, 0) == nil {
			c.s.record(c.tid, Denial{Path: path, Op: "write", Kind: KindProtected})
		}
		return
	}
	b, err := readAt(dfd, name)
	if err != nil {
		return
	}
	out, dropped := sanitizeGitConfig(b, s.keepFor(dir))
	if writeFresh(dfd, name, out, st.Mode&0o777) == nil && len(dropped) > 0 {
		c.s.record(c.tid, Denial{Path: path, Op: "write", Kind: KindProtected})
	}
}

// neutraliseHooks takes the execute bits off every hook in dir/hooks
// but the samples (a fresh copy: no other link or descriptor keeps
// them), and removes a hooks symbolic link and whatever in hooks is
// neither a file nor a directory.
func (s *Supervisor) neutraliseHooks(c *call, dfd int, dir string) {
	var st unix.Stat_t
	if unix.Fstatat(dfd, "hooks", &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if unix.Unlinkat(dfd, "hooks", 0) == nil {
			c.s.record(c.tid, Denial{Path: dir + "/hooks", Op: "write", Kind: KindProtected})
		}
		return
	}
	hfd, err := unix.Openat(dfd, "hooks", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(hfd)
	names, err := readDirNames(hfd)
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".sample") {
			continue
		}
		var hst unix.Stat_t
		if unix.Fstatat(hfd, name, &hst, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		path := dir + "/hooks/" + name
		switch hst.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFREG:
			if hst.Mode&0o111 == 0 && hst.Nlink == 1 {
				continue
			}
			b, err := readAt(hfd, name)
			if err == nil && writeFresh(hfd, name, b, hst.Mode&0o666) == nil && hst.Mode&0o111 != 0 {
				c.s.record(c.tid, Denial{Path: path, Op: "write", Kind: KindProtected})
			}
		default:
			if unix.Unlinkat(hfd, name, 0) == nil {
				c.s.record(c.tid, Denial{Path: path, Op: "write", Kind: KindProtected})
			}
		}
	}
}

// installConfig serves a rename onto the config of a git directory born
// in the session (git's own way of writing it: config.lock): refused
// when from holds a key outside gitKeepKeys, else from's content is
// written to a fresh file that replaces to (so that no descriptor of
// from, nor another link to it, writes the config later), and from is
// removed.
func (c *call) installConfig(from, to *loc) result {
	var st unix.Stat_t
	if err := unix.Fstatat(from.dir, from.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxConfig {
		return c.deny(unix.EROFS, &Denial{Path: to.path, Op: "write", Kind: KindProtected})
	}
	b, err := readAt(from.dir, from.name)
	if err != nil {
		return fail(err)
	}
	if _, dropped := sanitizeGitConfig(b, c.s.keepFor(parentOf(to.path))); len(dropped) > 0 {
		// It would add a key that runs code or reads from elsewhere
		// (the file there holds none: it was checked at its birth).
		return c.deny(unix.EROFS, &Denial{Path: to.path, Op: "write", Kind: KindProtected})
	}
	if err := writeFresh(to.dir, to.name, b, st.Mode&0o777); err != nil {
		return fail(err)
	}
	unix.Unlinkat(from.dir, from.name, 0)
	return ok
}

// readAt reads the regular file name of dir (without following a link
// or waiting on a FIFO), at most maxConfig bytes.
func readAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 64<<10)
	for len(out) <= maxConfig {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
	return nil, unix.EFBIG
}

// writeFresh replaces dir's name by a new file holding b, with mode:
// written beside it and renamed over it, so that it is a new inode no
// descriptor or hard link of anyone else reaches.
func writeFresh(dir int, name string, b []byte, mode uint32) error {
	var r [6]byte
	rand.Read(r[:])
	tmp := ".conch-" + hex.EncodeToString(r[:]) + "-" + name
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	for rest := b; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			unix.Unlinkat(dir, tmp, 0)
			return err
		}
		rest = rest[n:]
	}
	unix.Fchmod(fd, mode)
	unix.Close(fd)
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return err
	}
	return nil
}

// readDirNames lists a directory's entries.
func readDirNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
