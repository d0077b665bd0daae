//go:build linux

package nsinit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/frame"
	"github.com/conch-dev/conch/internal/sandbox"
)

// The server and the init talk over a unix stream socket pair: each
// message is a frame (internal/frame, as conch agent's protocol): a
// 4-byte big-endian length and a JSON object (a spawn's command packed
// after it: encode). A message that
// carries file descriptors (a spawn's stdin, stdout and stderr) sends them
// as SCM_RIGHTS with its first bytes, so they have arrived by the time the
// whole message has been read.

// maxMessage bounds one message: argv and environment together cannot
// exceed the kernel's ARG_MAX, a few MiB at most.
const maxMessage = 64 << 20

// maxFDs is the most descriptors one message carries.
const maxFDs = 64

// Operations. Requests carry an ID and get exactly one reply with the same
// ID and operation, except opRelease, which has none; the init also sends
// events with ID 0.
const (
	opPolicy    = "policy"    // server → init, first: Plan, the sandbox to enforce (nil: none); Dir, the session's spill directory ("": none); SpillRoot, what to hide around it; ShmBytes, the size of /dev/shm; CacheSession, the session's cache layer; descriptors: the session's tasks files of the cgroup v1 limits
	opReady     = "ready"     // init → server, once: set up, serving; Unenforced, CacheLayer
	opFail      = "fail"      // init → server, once: set-up failed; Err says why
	opSpawn     = "spawn"     // Path, Args, Env, Dir, Terminal, three descriptors → Pid
	opSignal    = "signal"    // Pid, Sig: signal the command's process group
	opAlive     = "alive"     // Pid → Alive: a member of its group still runs
	opTerminate = "terminate" // Pid, Grace → Escalated
	opLeftovers = "leftovers" // Pid: kill everything the command started
	opStop      = "stop"      // Pid, Grace: terminate, then leftovers, in one request (a held command's group first; a released one's leftovers only)
	opRelease   = "release"   // Pid: the server is done with the command
	opCount     = "count"     // Pid → Count: the live processes charged to the command, its shell aside
	opExit      = "exit"      // init → server event: Pid, Status (raw wait status)
	opDenied    = "denied"    // init → server event: Pid, the command charged; Denial, what the sandbox denied it (docs/sandbox.md#the-denial-record); More, denials it could not keep
	opPTY       = "pty"       // → two descriptors: a new terminal's master and slave, in the session's devpts
)

// message is every request, reply and event; each uses the fields its
// operation names.
type message struct {
	ID        uint64        `json:"id,omitempty"`
	Op        string        `json:"op"`
	Pid       int           `json:"pid,omitempty"`
	Path      string        `json:"path,omitempty"`
	Args      []string      `json:"args,omitempty"`
	Env       []string      `json:"env,omitempty"`
	Dir       string        `json:"dir,omitempty"`
	Terminal  bool          `json:"terminal,omitempty"`
	NFDs      int           `json:"nfds,omitempty"`
	Sig       int           `json:"sig,omitempty"`
	Grace     time.Duration `json:"grace,omitempty"`
	Status    int           `json:"status,omitempty"`
	Alive     bool          `json:"alive,omitempty"`
	Escalated bool          `json:"escalated,omitempty"`
	Count     int           `json:"count,omitempty"`
	Err       string        `json:"err,omitempty"`

	// Cgroup: a spawn's fourth descriptor is its cgroup v2 (for clone3);
	// the tasks files of its cgroups v1, if any, follow.
	Cgroup bool `json:"cgroup,omitempty"`

	Plan       *sandbox.Plan `json:"plan,omitempty"`
	Unenforced []string      `json:"unenforced,omitempty"`

	Denial *sandbox.Denial `json:"denial,omitempty"`
	More   int             `json:"more,omitempty"`
	// The init's own mounts (opPolicy): the user's spill directories'
	// common root, the size of the private /dev/shm, the directory of the
	// session's cache layer (Plan.Caches); and (opReady) how the cache
	// layer was mounted.
	SpillRoot    string `json:"spillRoot,omitempty"`
	ShmBytes     int64  `json:"shmBytes,omitempty"`
	CacheSession string `json:"cacheSession,omitempty"`
	CacheLayer   string `json:"cacheLayer,omitempty"`

	// fds are the descriptors a reply carried (opPTY's), for its caller.
	fds []int
	// Net (opPolicy) is Options.Network; TUN and Listening (opReady) say
	// which descriptors follow: the device first, then one listener per
	// address.
	Net       *Network `json:"net,omitempty"`
	TUN       bool     `json:"tun,omitempty"`
	Listening []string `json:"listening,omitempty"`
}

// conn is one end of the socket pair. send may be called concurrently;
// recv only from one goroutine.
type conn struct {
	rw  msgConn
	wmu sync.Mutex

	buf []byte // received bytes not yet consumed
	fds []int  // received descriptors not yet claimed by a message

	chunk, oob []byte // recv's buffers, kept: most reads are small
}

// msgConn is a unix socket that carries descriptors: a *net.UnixConn on
// the server's side (its Close wakes a blocked reader), an fdConn in the
// init.
type msgConn interface {
	ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)
	WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error)
	Write(b []byte) (int, error)
	Close() error
}

// newConn wraps f, one end of the socket pair; f is closed (the conn holds
// its own duplicate).
func newConn(f *os.File) (*conn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("nsinit: socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("nsinit: socket: not a unix socket")
	}
	return &conn{rw: uc}, nil
}

// fdConn is a blocking socket descriptor, read and written with plain
// system calls: a read wakes the very thread that waits in it, with no
// hand-off through Go's network poller. Close does not wake a blocked
// reader; the init never needs it to.
type fdConn int

func (fd fdConn) ReadMsgUnix(b, oob []byte) (n, oobn, flags int, _ *net.UnixAddr, err error) {
	for {
		n, oobn, flags, _, err = unix.Recvmsg(int(fd), b, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			return n, oobn, flags, nil, err
		}
	}
}

func (fd fdConn) WriteMsgUnix(b, oob []byte, _ *net.UnixAddr) (n, oobn int, err error) {
	for {
		n, err = unix.SendmsgN(int(fd), b, oob, nil, 0)
		if err != unix.EINTR {
			return n, len(oob), err
		}
	}
}

func (fd fdConn) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Write(int(fd), b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

func (fd fdConn) Close() error { return unix.Close(int(fd)) }

// socketPair returns two connected unix stream sockets, close-on-exec.
func socketPair() (a, b *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("nsinit: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "nsinit-server"), os.NewFile(uintptr(fds[1]), "nsinit-init"), nil
}

// send writes m with files attached.
func (c *conn) send(m *message, files ...*os.File) error {
	m.NFDs = len(files)
	b, err := encode(m)
	if err != nil {
		return fmt.Errorf("nsinit: encode %s: %w", m.Op, err)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, _, err := c.rw.WriteMsgUnix(b, oob, nil)
	if err == nil && n < len(b) {
		// A stream socket may take a long message in parts; the
		// descriptors went with the first.
		_, err = c.rw.Write(b[n:])
	}
	if err != nil {
		return fmt.Errorf("nsinit: send %s: %w", m.Op, err)
	}
	return nil
}

// recv reads the next message and the descriptors it carries (owned by
// the caller, close-on-exec).
func (c *conn) recv() (*message, []int, error) {
	for {
		body, rest, ok, err := frame.Cut(c.buf, maxMessage)
		if err != nil {
			return nil, nil, fmt.Errorf("nsinit: receive: %w", err)
		}
		if ok {
			m, err := decode(body)
			c.buf = rest
			if err != nil {
				return nil, nil, fmt.Errorf("nsinit: receive: %w", err)
			}
			if m.NFDs < 0 || m.NFDs > len(c.fds) {
				return nil, nil, fmt.Errorf("nsinit: receive %s: %d descriptors announced, %d arrived", m.Op, m.NFDs, len(c.fds))
			}
			fds := c.fds[:m.NFDs:m.NFDs]
			c.fds = c.fds[m.NFDs:]
			return m, fds, nil
		}
		if err := c.fill(); err != nil {
			return nil, nil, err
		}
	}
}

// A spawn's command (its path, directory, arguments and environment)
// travels packed after the JSON of its message, not in it: a NUL, then
// the strings joined by NULs, the number of arguments third. Decoding
// them as JSON was most of a spawn's work in the init: about 25 µs of a
// cold init's time for 35 environment variables, on every command's path
// (a JSON decoder scans every byte of every string twice). JSON's
// encoding never holds a NUL, so the first one ends it. A command with a
// NUL in a string travels as JSON, and its exec fails as it always did.
// encode returns m's frame, its command packed when it can be.
func encode(m *message) ([]byte, error) {
	if m.Op != opSpawn || m.Path == "" && m.Dir == "" && len(m.Args) == 0 && len(m.Env) == 0 || !packable(m) {
		return frame.Encode(m, maxMessage)
	}
	c := *m
	c.Path, c.Dir, c.Args, c.Env = "", "", nil, nil
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	n := len(body) + 1 + len(m.Path) + len(m.Dir) + 24
	for _, s := range m.Args {
		n += len(s) + 1
	}
	for _, s := range m.Env {
		n += len(s) + 1
	}
	b := make([]byte, frame.HeaderSize, frame.HeaderSize+n)
	b = append(b, body...)
	b = append(b, 0)
	b = append(b, m.Path...)
	b = append(b, 0)
	b = append(b, m.Dir...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(len(m.Args)), 10)
	for _, list := range [][]string{m.Args, m.Env} {
		for _, s := range list {
			b = append(b, 0)
			b = append(b, s...)
		}
	}
	if len(b)-frame.HeaderSize > maxMessage {
		return nil, frame.ErrTooLarge
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-frame.HeaderSize))
	return b, nil
}

// packable reports whether none of m's command's strings holds a NUL.
func packable(m *message) bool {
	if strings.IndexByte(m.Path, 0) >= 0 || strings.IndexByte(m.Dir, 0) >= 0 {
		return false
	}
	for _, list := range [][]string{m.Args, m.Env} {
		for _, s := range list {
			if strings.IndexByte(s, 0) >= 0 {
				return false
			}
		}
	}
	return true
}

// decode returns the message of a frame's body, its command unpacked.
func decode(body []byte) (*message, error) {
	js, tail, isPacked := bytes.Cut(body, []byte{0})
	m := new(message)
	if err := json.Unmarshal(js, m); err != nil {
		return nil, err
	}
	if !isPacked {
		return m, nil
	}
	if m.Op != opSpawn {
		return nil, fmt.Errorf("a packed command in a %s message", m.Op)
	}
	parts := strings.Split(string(tail), "\x00")
	if len(parts) < 3 {
		return nil, errors.New("a packed command cut short")
	}
	argc, err := strconv.Atoi(parts[2])
	if err != nil || argc < 0 || argc > len(parts)-3 {
		return nil, fmt.Errorf("a packed command's argument count %q", parts[2])
	}
	m.Path, m.Dir = parts[0], parts[1]
	if argc > 0 {
		m.Args = parts[3 : 3+argc : 3+argc]
	}
	if len(parts) > 3+argc {
		m.Env = parts[3+argc:]
	}
	return m, nil
}

// fill reads what the socket has, keeping the descriptors that came with
// it.
func (c *conn) fill() error {
	if c.chunk == nil {
		c.chunk = make([]byte, 64<<10)
		c.oob = make([]byte, unix.CmsgSpace(maxFDs*4))
	}
	chunk, oob := c.chunk, c.oob
	n, oobn, flags, _, err := c.rw.ReadMsgUnix(chunk, oob)
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, cm := range msgs {
				if fds, err := unix.ParseUnixRights(&cm); err == nil {
					c.fds = append(c.fds, fds...)
				}
			}
		}
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		return errors.New("nsinit: receive: descriptors cut off")
	}
	if n > 0 {
		if len(c.buf) == 0 && cap(c.buf) > 1<<20 {
			c.buf = nil // let a long message's buffer go
		}
		c.buf = append(c.buf, chunk[:n]...)
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return errEOF
	}
	return fmt.Errorf("nsinit: receive: %w", err)
}

// errEOF is recv's error when the other end closed the socket.
var errEOF = errors.New("nsinit: the other end closed the socket")

func (c *conn) close() error { return c.rw.Close() }

// closeFDs closes descriptors received but not used.
func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
