//go:build linux

package sandbox

import (
	"encoding/binary"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Unix sockets (docs/sandbox.md#unix-sockets): a session's commands
// bind and connect sockets among themselves; a connect to any other
// socket is refused unless the plan lists its path (unix_sockets). The
// supervisor binds and connects the caller's own socket itself
// (pidfd_getfd gives it the same open socket), on the address it read
// and checked, and answers with the result: what the caller's memory
// says afterwards changes nothing.

// sockaddrMax is the size of struct sockaddr_un; sockaddrStorage, of
// struct sockaddr_storage, the longest address the kernel takes.
const (
	sockaddrMax     = 110
	sockaddrStorage = 128
)

// socketDomain duplicates the caller's socket fd and returns it with its
// domain.
func (c *call) socketDomain(fd int) (int, int, error) {
	s, err := c.getfd(fd)
	if err != nil {
		if err == unix.EBADF || err == unix.ENOENT {
			return -1, 0, unix.EBADF
		}
		return -1, 0, err
	}
	dom, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return -1, 0, err // ENOTSOCK
	}
	return s, dom, nil
}

// connect serves connect.
func (c *call) connect(fd int, addr uint64, n int) result {
	s, dom, err := c.socketDomain(fd)
	if err != nil {
		return fail(err)
	}
	if c.s.plan.Mode == FullAccess {
		// It restricts no socket: the kernel runs the call.
		if sa, err := c.sockaddr(addr, min(n, 2)); err == nil {
			c.recordNetworkOff(dom, sa)
		}
		return cont
	}
	if dom != unix.AF_UNIX {
		return c.otherSocket(s, dom, unix.SYS_CONNECT, addr, n)
	}
	sa, err := c.sockaddr(addr, n)
	if err != nil {
		return fail(err)
	}
	if len(sa) <= 2 || binary.NativeEndian.Uint16(sa) != unix.AF_UNIX {
		return c.rawSock(s, unix.SYS_CONNECT, sa) // the kernel's own error (or AF_UNSPEC's disconnect)
	}
	path := sunPath(sa)
	if len(path) > 0 && path[0] == 0 {
		name := "@" + string(path[1:])
		c.s.sockMu.Lock()
		own := c.s.abstract[name]
		c.s.sockMu.Unlock()
		if !own {
			return c.deny(unix.EACCES, &Denial{Path: name, Op: "connect", Kind: KindSocket})
		}
		if !c.valid() {
			return callerGone
		}
		return c.connectWait(s, dom, sa)
	}
	l, err := c.resolve(unix.AT_FDCWD, string(path), true, false)
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
	target := l.path
	if l.obj < 0 {
		target = fdPath(obj)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		c.s.sockMu.Lock()
		own := c.s.sockets[sockID(uint64(st.Dev), st.Ino)]
		c.s.sockMu.Unlock()
		if !own && !listed(target, c.s.plan.UnixSockets) {
			return c.deny(unix.EACCES, &Denial{Path: target, Op: "connect", Kind: KindSocket})
		}
	}
	if !c.valid() {
		return callerGone
	}
	// Connect through our descriptor of the very file checked.
	return c.connectWait(s, dom, sockaddrUnix("/proc/self/fd/"+strconv.Itoa(obj)))
}

// otherSocket connects or binds (nr) s, the supervisor's duplicate of a
// socket that is not a unix socket, with the caller's address read once.
// Letting the kernel run the call would have it look the caller's
// descriptor up again, which another of its threads can meanwhile make a
// unix socket (dup2), connected to any path or bound at any name.
func (c *call) otherSocket(s, dom int, nr uintptr, addr uint64, n int) result {
	sa, err := c.readBytes(addr, max(0, min(n, sockaddrStorage)))
	if err != nil {
		return fail(err)
	}
	if n > sockaddrStorage {
		return fail(unix.EINVAL) // the kernel's answer
	}
	if nr == unix.SYS_CONNECT {
		c.recordNetworkOff(dom, sa)
	}
	unspec := len(sa) >= 2 && binary.NativeEndian.Uint16(sa) == unix.AF_UNSPEC
	if c.internetOff(dom) && !(nr == unix.SYS_CONNECT && unspec) {
		if typ, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_TYPE); err == nil && typ == unix.SOCK_STREAM {
			// Landlock's answer to the command's own TCP connect or bind
			// (its rules do not bind the supervisor's threads): refused,
			// loopback included.
			return fail(unix.EACCES)
		}
	}
	if !c.valid() {
		return callerGone
	}
	if nr == unix.SYS_CONNECT {
		return c.connectWait(s, dom, sa)
	}
	return c.rawSock(s, nr, sa)
}

// recordNetworkOff records an internet connect to address sa (not
// AF_UNSPEC, a disconnect) as the sandbox's denial when the network is
// off: the empty network namespace refuses it.
func (c *call) recordNetworkOff(dom int, sa []byte) {
	if c.internetOff(dom) && len(sa) >= 2 && binary.NativeEndian.Uint16(sa) != unix.AF_UNSPEC {
		c.s.record(c.tid, Denial{Op: "connect", Kind: KindNetwork})
	}
}

// internetOff reports whether dom is an internet domain and the plan's
// network is off.
func (c *call) internetOff(dom int) bool {
	return (dom == unix.AF_INET || dom == unix.AF_INET6) && c.s.plan.Network == NetworkOff
}

// listed reports whether path is one of the plan's unix_sockets.
func listed(path string, socks []string) bool {
	for _, p := range socks {
		if p == path {
			return true
		}
	}
	return false
}

// bind serves bind.
func (c *call) bind(fd int, addr uint64, n int) result {
	s, dom, err := c.socketDomain(fd)
	if err != nil {
		return fail(err)
	}
	if dom != unix.AF_UNIX {
		return c.otherSocket(s, dom, unix.SYS_BIND, addr, n)
	}
	sa, err := c.sockaddr(addr, n)
	if err != nil {
		return fail(err)
	}
	if len(sa) < 2 || binary.NativeEndian.Uint16(sa) != unix.AF_UNIX {
		return c.rawSock(s, unix.SYS_BIND, sa)
	}
	path := sunPath(sa)
	if len(sa) == 2 || path[0] == 0 {
		// An abstract name (or the kernel's choice of one: autobind).
		if !c.valid() {
			return callerGone
		}
		r := c.rawSock(s, unix.SYS_BIND, sa)
		if r.errno == 0 {
			if got, err := unix.Getsockname(s); err == nil {
				if a, ok := got.(*unix.SockaddrUnix); ok && len(a.Name) > 0 && a.Name[0] == '@' {
					c.s.sockMu.Lock()
					c.s.abstract[a.Name] = true
					c.s.sockMu.Unlock()
				}
			}
		}
		return r
	}
	l, err := c.resolve(unix.AT_FDCWD, string(path), false, false)
	if err != nil {
		return fail(err)
	}
	var st unix.Stat_t
	if l.obj >= 0 || unix.Fstatat(l.dir, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return fail(unix.EADDRINUSE)
	}
	unlock := c.s.git.guard(at(l))
	defer unlock()
	v := c.s.judge(l.path, how{act: actCreate, special: true})
	if v.errno != 0 || v.strip || v.sanitize {
		errno := v.errno
		if errno == 0 {
			errno = unix.EROFS
		}
		return c.deny(errno, firstDenial(v.denial, &Denial{Path: l.path, Op: "write", Kind: KindProtected}))
	}
	if err := c.umask(); err != nil {
		return fail(err)
	}
	// The socket keeps the address it was bound to, which the caller
	// reads back (getsockname) and hands to others: bind it to the
	// caller's own path, from the caller's working directory.
	if path[0] != '/' {
		cwd, err := c.dirBase(unix.AT_FDCWD)
		if err != nil {
			return fail(err)
		}
		if err := unix.Fchdir(cwd); err != nil {
			return fail(err)
		}
	}
	if !c.valid() {
		return callerGone
	}
	r := c.rawSock(s, unix.SYS_BIND, sa)
	if r.errno == 0 {
		if id, ok := boundFile(s); ok {
			c.s.sockMu.Lock()
			c.s.sockets[id] = true
			c.s.sockMu.Unlock()
		}
	} else if v.kernel && isDenial(r.errno) {
		return c.deny(r.errno, &Denial{Path: l.path, Op: "write", Kind: KindProtected})
	}
	return r
}

// sockID names a socket file as sock_diag does: 32-bit device and inode
// numbers.
func sockID(dev, ino uint64) devIno { return devIno{uint64(uint32(dev)), uint64(uint32(ino))} }

// sockaddr reads the caller's socket address.
func (c *call) sockaddr(addr uint64, n int) ([]byte, error) {
	if n < 0 || n > sockaddrMax {
		return nil, unix.EINVAL
	}
	return c.readBytes(addr, n)
}

// sunPath is the path bytes of a sockaddr_un, up to its first NUL (an
// abstract name keeps its leading NUL and every byte after).
func sunPath(sa []byte) []byte {
	p := sa[2:]
	if len(p) > 0 && p[0] == 0 {
		return p
	}
	for i, b := range p {
		if b == 0 {
			return p[:i]
		}
	}
	return p
}

// sockaddrUnix is a sockaddr_un of path.
func sockaddrUnix(path string) []byte {
	sa := make([]byte, 2+len(path)+1)
	binary.NativeEndian.PutUint16(sa, unix.AF_UNIX)
	copy(sa[2:], path)
	return sa
}

// rawSock binds or connects s to the address sa as given.
func (c *call) rawSock(s int, nr uintptr, sa []byte) result {
	var p unsafe.Pointer
	if len(sa) > 0 {
		p = unsafe.Pointer(&sa[0])
	}
	for {
		_, _, errno := unix.Syscall(nr, uintptr(s), uintptr(p), uintptr(len(sa)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return result{errno: errno, fd: -1}
		}
		return ok
	}
}

// boundFile is the file a unix socket is bound to, asked of the kernel
// (sock_diag's UNIX_DIAG_VFS), not looked up by its path, which a
// command could have changed since the bind.
func boundFile(s int) (devIno, bool) {
	var st unix.Stat_t
	if unix.Fstat(s, &st) != nil {
		return devIno{}, false
	}
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return devIno{}, false
	}
	defer unix.Close(nl)
	const (
		sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
		udiagShowVFS     = 1 << 1
		unixDiagVFS      = 1
	)
	// struct nlmsghdr + struct unix_diag_req
	req := make([]byte, 16+24)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	req[16] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(req[20:], ^uint32(0))     // all states
	binary.NativeEndian.PutUint32(req[24:], uint32(st.Ino)) // udiag_ino
	binary.NativeEndian.PutUint32(req[28:], udiagShowVFS)   // udiag_show
	binary.NativeEndian.PutUint32(req[32:], ^uint32(0))     // cookie: none
	binary.NativeEndian.PutUint32(req[36:], ^uint32(0))
	if err := unix.Sendto(nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return devIno{}, false
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(nl, buf, 0)
	if err != nil || n < 16+16 {
		return devIno{}, false
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return devIno{}, false
	}
	for _, m := range msgs {
		if m.Header.Type != sockDiagByFamily || len(m.Data) < 16 {
			continue
		}
		// struct unix_diag_msg (16 bytes), then attributes.
		attrs := m.Data[16:]
		for len(attrs) >= 4 {
			alen := int(binary.NativeEndian.Uint16(attrs[0:]))
			atype := binary.NativeEndian.Uint16(attrs[2:])
			if alen < 4 || alen > len(attrs) {
				break
			}
			if atype == unixDiagVFS && alen >= 12 {
				ino := binary.NativeEndian.Uint32(attrs[4:])
				kdev := binary.NativeEndian.Uint32(attrs[8:]) // the kernel's own dev_t: major<<20 | minor
				return sockID(unix.Mkdev(kdev>>20, kdev&0xfffff), uint64(ino)), true
			}
			attrs = attrs[(alen+3)&^3:]
		}
	}
	return devIno{}, false
}
