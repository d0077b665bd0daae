//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/seccompnotify"
)

// The supervisor (docs/sandbox.md#the-supervisor) sees, outside the
// commands' reach, every operation that writes a path (open for writing,
// create, rename, link, unlink, truncate, change mode, owner or extended
// attributes) and every connect and bind of a socket. A seccomp filter
// on the init's spawner thread, which every command inherits, hands
// them to it (SECCOMP_RET_USER_NOTIF); it runs on other threads of the
// init, which are not filtered.
//
// It never lets the kernel run an operation it judged on memory the
// command can still change (SECCOMP_USER_NOTIF_FLAG_CONTINUE re-reads
// it): it resolves the path itself, from the command's working directory
// and descriptors, decides, and performs the operation itself on what it
// resolved, handing back the result or the new descriptor
// (SECCOMP_IOCTL_NOTIF_ADDFD). Only operations no path decides (a
// connect of an internet socket) continue.
//
// It acts with no more privilege than the command: its threads have no
// effective capability (a command has none either), their own working
// directory and umask (unshare(CLONE_FS)), set to the command's umask
// before anything is created, the same user and groups (commands cannot
// change them), and they sit in the same Landlock domain and mount
// namespace, so the kernel still denies them what it denies the command.

// pendingListener is the listener of the filter Restrict loaded on the
// calling thread, for Supervise.
var (
	pendingMu       sync.Mutex
	pendingListener *seccompnotify.Listener
)

// Supervisor serves the notifications of the filter Restrict loaded.
type Supervisor struct {
	plan   *Plan
	l      *seccompnotify.Listener
	record func(tid int, d Denial)
	// notifyReads: opens for reading are notified too, to record reads
	// of deny_read paths.
	notifyReads bool

	workers, idle atomic.Int32

	git gitState

	sockMu   sync.Mutex
	sockets  map[devIno]bool // socket files the session's commands bound
	abstract map[string]bool // abstract socket names they bound
}

// maxWorkers bounds the supervisor's threads: one is always waiting for
// the next notification while others perform operations that may block
// (opening a FIFO, connecting to a busy socket).
const maxWorkers = 64

// Supervise starts the supervisor of the filter Restrict loaded for plan
// on this thread, if it loaded one (a host with user notification), and
// reports whether it did. record is called, before the operation's
// caller resumes, with the thread that was denied something and what.
func Supervise(plan *Plan, record func(tid int, d Denial)) (bool, error) {
	pendingMu.Lock()
	l := pendingListener
	pendingListener = nil
	pendingMu.Unlock()
	if l == nil {
		return false, nil
	}
	s := &Supervisor{
		plan: plan, l: l, record: record, notifyReads: len(plan.DenyRead) > 0,
		sockets: make(map[devIno]bool), abstract: make(map[string]bool),
	}
	s.git.init()
	// Two to start with: one serves, one waits.
	s.workers.Add(2)
	go s.worker()
	go s.worker()
	return true, nil
}

// worker receives and serves notifications on a thread of its own,
// until the listener fails (the init is ending).
func (s *Supervisor) worker() {
	// Never unlocked: the thread's working directory, umask and
	// capabilities are its own, and it ends with this goroutine.
	runtime.LockOSThread()
	if err := prepareThread(); err != nil {
		fmt.Fprintf(os.Stderr, "conch supervisor: %v\n", err)
		s.workers.Add(-1)
		return
	}
	// A receiver of its own: a notification wakes one idle worker,
	// not all of them (seccompnotify.Receiver).
	rcv, err := s.l.NewReceiver()
	if err != nil {
		fmt.Fprintf(os.Stderr, "conch supervisor: %v\n", err)
		s.workers.Add(-1)
		return
	}
	var n seccompnotify.Notif
	for {
		s.idle.Add(1)
		err := rcv.Receive(&n)
		if s.idle.Add(-1) == 0 {
			s.grow()
		}
		if err != nil {
			s.workers.Add(-1)
			return
		}
		s.serve(&n)
	}
}

// grow starts one more worker, unless there are enough.
func (s *Supervisor) grow() {
	for {
		w := s.workers.Load()
		if w >= maxWorkers {
			return
		}
		if s.workers.CompareAndSwap(w, w+1) {
			go s.worker()
			return
		}
	}
}

// prepareThread gives the calling thread its own working directory and
// umask, and drops its effective capabilities (keeping them permitted,
// so that reaching a non-dumpable command's memory can raise
// CAP_SYS_PTRACE for that moment).
func prepareThread() error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare the thread's file system context: %w", err)
	}
	// A notified command waits for this thread: woken, it runs at once
	// beside CPU-bound work (a hint; its failure changes nothing else).
	proc.ShortSlice()
	return setEffective(0)
}

// setEffective sets the calling thread's effective capabilities to caps
// (a bit mask of the first 64), within its permitted set.
func setEffective(caps uint64) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective = uint32(caps) & data[0].Permitted
	data[1].Effective = uint32(caps>>32) & data[1].Permitted
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// result is the answer to one notification.
type result struct {
	errno   unix.Errno
	val     int64
	fd      int // when > -1, a descriptor of ours to install in the caller: its number is the result
	cloexec bool
	cont    bool // let the kernel run the call
	gone    bool // the caller is gone: nothing to answer
}

func fail(e error) result {
	var errno unix.Errno
	if !errors.As(e, &errno) {
		errno = unix.EIO
	}
	return result{errno: errno, fd: -1}
}

var (
	ok         = result{fd: -1}
	cont       = result{fd: -1, cont: true}
	callerGone = result{fd: -1, gone: true}
)

// serve answers one notification.
func (s *Supervisor) serve(n *seccompnotify.Notif) {
	abi := abiOf(n.Data.Arch)
	var op sysOp
	if abi != nil {
		op = abi.ops[uint32(n.Data.Nr)]
	}
	if op == sysNone {
		// Not ours: the filter notifies nothing else. Refuse rather
		// than run what nothing judged.
		s.l.Fail(n.ID, unix.ENOSYS)
		return
	}
	c := &call{s: s, n: n, abi: abi, tid: int(n.Pid), cwd: -1}
	r := c.dispatch(op)

	c.release()
	switch {
	case r.gone:
	case r.fd > -1:
		if err := s.l.SendFD(n.ID, r.fd, r.cloexec); err != nil && err != seccompnotify.ErrGone {
			s.l.Fail(n.ID, unix.EMFILE)
		}
		unix.Close(r.fd)
	case r.cont:
		s.l.Continue(n.ID)
	case r.errno != 0:
		s.l.Fail(n.ID, r.errno)
	default:
		s.l.Return(n.ID, r.val)
	}
}

// call is one notification being served, and the descriptors opened for
// it.
type call struct {
	s   *Supervisor
	n   *seccompnotify.Notif
	abi *sysABI
	tid int

	cwd    int // the caller's working directory, opened once
	status *procStatus
	fds    []int // closed by release
}

// release closes what the call opened.
func (c *call) release() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// keep registers fd to be closed by release, and returns it.
func (c *call) keep(fd int) int {
	c.fds = append(c.fds, fd)
	return fd
}

// valid reports whether the caller still waits in its call: checked
// after reading its memory and its /proc entries, before acting.
func (c *call) valid() bool { return c.s.l.Valid(c.n.ID) }

// arg is argument i, cut to 32 bits in the compat ABI.
func (c *call) arg(i int) uint64 {
	v := c.n.Data.Args[i]
	if c.abi.compat {
		v = uint64(uint32(v))
	}
	return v
}

// fdArg is argument i as a descriptor (an int: AT_FDCWD is negative).
func (c *call) fdArg(i int) int { return int(int32(uint32(c.n.Data.Args[i]))) }

// uintArg is argument i as an unsigned int (flags, modes, ids).
func (c *call) uintArg(i int) uint32 { return uint32(c.n.Data.Args[i]) }

// path reads the path at argument i.
func (c *call) path(i int) (string, error) {
	return c.readString(c.arg(i), unix.PathMax-1)
}

// readString reads a NUL-terminated string of the caller's memory.
func (c *call) readString(addr uint64, max int) (string, error) {
	s, err := seccompnotify.ReadString(c.tid, addr, max)
	if err == unix.EPERM || err == unix.EACCES {
		// A command that made itself non-dumpable: read it with
		// CAP_SYS_PTRACE for that moment.
		c.withPtrace(func() { s, err = seccompnotify.ReadString(c.tid, addr, max) })
	}
	return s, err
}

// readBytes reads n bytes of the caller's memory at addr.
func (c *call) readBytes(addr uint64, n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if addr == 0 {
		return nil, unix.EFAULT
	}
	b := make([]byte, n)
	got, err := seccompnotify.ReadMemory(c.tid, addr, b)
	if err == unix.EPERM || err == unix.EACCES {
		c.withPtrace(func() { got, err = seccompnotify.ReadMemory(c.tid, addr, b) })
	}
	if err != nil {
		return nil, err
	}
	if got < n {
		return nil, unix.EFAULT
	}
	return b, nil
}

// withPtrace runs f with CAP_SYS_PTRACE effective on this thread, where
// the init has it (root, or an init given it as an ambient capability).
func (c *call) withPtrace(f func()) {
	if setEffective(1<<unix.CAP_SYS_PTRACE) != nil {
		return
	}
	defer setEffective(0)
	f()
}

// procOpen opens /proc/<tid>/<name> of the caller with flags, with
// CAP_SYS_PTRACE if the caller is not dumpable.
func (c *call) procOpen(name string, flags int) (int, error) {
	p := "/proc/" + strconv.Itoa(c.tid) + "/" + name
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
	if err == unix.EACCES || err == unix.EPERM {
		c.withPtrace(func() { fd, err = unix.Open(p, flags|unix.O_CLOEXEC, 0) })
	}
	if err != nil {
		return -1, err
	}
	return c.keep(fd), nil
}

// procStatus is what the call needs of /proc/<tid>/status.
type procStatus struct {
	tgid  int
	umask int
}

// stat reads the caller's status once.
func (c *call) procStatus() (*procStatus, error) {
	if c.status != nil {
		return c.status, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.tid) + "/status")
	if err != nil {
		return nil, unix.ESRCH
	}
	st := &procStatus{tgid: c.tid, umask: 0o022}
	for line := range strings.Lines(string(b)) {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Tgid":
			st.tgid, _ = strconv.Atoi(v)
		case "Umask":
			if u, err := strconv.ParseInt(v, 8, 32); err == nil {
				st.umask = int(u)
			}
		}
	}
	c.status = st
	return st, nil
}

// umask sets this thread's umask to the caller's, before a create.
func (c *call) umask() error {
	st, err := c.procStatus()
	if err != nil {
		return err
	}
	unix.Umask(st.umask)
	return nil
}

// getfd duplicates the caller's descriptor fd into this process.
func (c *call) getfd(fd int) (int, error) {
	pidfd, err := c.pidfd()
	if err != nil {
		return -1, err
	}
	defer unix.Close(pidfd)
	got, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err == unix.EPERM {
		c.withPtrace(func() { got, err = unix.PidfdGetfd(pidfd, fd, 0) })
	}
	if err != nil {
		return -1, err
	}
	return c.keep(got), nil
}

// pidfd opens a pidfd of the caller's process (ESRCH when there is none
// by its number). Its number could be another's once the caller is gone:
// the call's validity, checked after, says it was not.
func (c *call) pidfd() (int, error) {
	st, err := c.procStatus()
	if err != nil {
		return -1, err
	}
	pidfd, err := unix.PidfdOpen(st.tgid, 0)
	if err != nil {
		return -1, unix.ESRCH
	}
	return pidfd, nil
}

// deny records d for the caller (when it names something) and returns
// the failure errno.
func (c *call) deny(errno unix.Errno, d *Denial) result {
	if d != nil {
		c.s.record(c.tid, *d)
	}
	return result{errno: errno, fd: -1}
}
