//go:build linux

// Package seccompnotify loads seccomp filters whose rules hand system
// calls to a supervisor (SECCOMP_RET_USER_NOTIF), and serves those
// notifications: receive one, read the calling thread's memory, and
// answer it with a result, a descriptor installed in the caller
// (SECCOMP_IOCTL_NOTIF_ADDFD), or "let the kernel run it"
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
//
// golang.org/x/sys/unix has the constants of the interface but not its
// structures, nor the ioctls added after the first one; they are defined
// here from linux/seccomp.h.
//
// A notified thread waits in its system call until the supervisor
// answers. Filters are loaded with SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
// (Linux 5.19): once the supervisor has received a notification, only a
// fatal signal interrupts the wait, so an operation the supervisor
// performed on the caller's behalf is never performed a second time by
// a restarted system call (Go programs get SIGURG all the time).
package seccompnotify

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Data is struct seccomp_data: the system call as the filter saw it.
type Data struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// Notif is struct seccomp_notif: one notification.
type Notif struct {
	ID    uint64
	Pid   uint32 // the calling thread, in the supervisor's PID namespace
	Flags uint32
	Data  Data
}

// resp is struct seccomp_notif_resp.
type resp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// addfd is struct seccomp_notif_addfd.
type addfd struct {
	ID         uint64
	Flags      uint32
	SrcFD      uint32
	NewFD      uint32
	NewFDFlags uint32
}

// ioctls of the listener (linux/seccomp.h: SECCOMP_IOWR(0, …) and on).
const (
	ioctlRecv     = 0xc0502100 // SECCOMP_IOCTL_NOTIF_RECV
	ioctlSend     = 0xc0182101 // SECCOMP_IOCTL_NOTIF_SEND
	ioctlIDValid  = 0x40082102 // SECCOMP_IOCTL_NOTIF_ID_VALID
	ioctlAddFD    = 0x40182103 // SECCOMP_IOCTL_NOTIF_ADDFD
	ioctlSetFlags = 0x40082104 // SECCOMP_IOCTL_NOTIF_SET_FLAGS
	syncWakeUp    = 1          // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
)

// The sizes the structures above must have, as the kernel's.
var _ = [1]struct{}{}[unsafe.Sizeof(Notif{})-80]
var _ = [1]struct{}{}[unsafe.Sizeof(resp{})-24]
var _ = [1]struct{}{}[unsafe.Sizeof(addfd{})-24]

// Listener is the supervisor's end of a filter: the descriptor
// SECCOMP_FILTER_FLAG_NEW_LISTENER returned. Its methods may be called
// from several threads at once; each notification is received by one.
type Listener struct {
	f  *os.File
	fd int // f's, read without f's lock by the threads that receive
	// stop is an eventfd Close writes, which wakes every Receiver; it
	// is closed by the last of the listener and its receivers to close
	// (refs), so that no receiver waits on a descriptor closed under it.
	stop   int
	refs   atomic.Int32
	closed atomic.Bool

	recvMu sync.Mutex // one receive at a time: see receiveReady

	syncWake bool // SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP is set (Load)
}

// newListener wraps fd, a listener descriptor this process owns.
func newListener(fd int) *Listener {
	l := &Listener{f: os.NewFile(uintptr(fd), "seccomp-listener"), fd: fd, stop: -1}
	if efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err == nil {
		l.stop = efd
	}
	l.refs.Store(1)
	return l
}

// Close closes the listener: every thread waiting in a notified system
// call then gets ENOSYS, and every Receiver returns.
func (l *Listener) Close() error {
	if l.closed.Swap(true) {
		return os.ErrClosed
	}
	l.wake()
	err := l.f.Close()
	l.release()
	return err
}

// wake makes every Receiver's wait return, for good.
func (l *Listener) wake() {
	if l.stop >= 0 {
		one := [8]byte{1}
		unix.Write(l.stop, one[:])
	}
}

// release drops one hold on stop; the last closes it.
func (l *Listener) release() {
	if l.refs.Add(-1) == 0 && l.stop >= 0 {
		unix.Close(l.stop)
	}
}

// ErrGone is returned for a notification whose caller is gone (killed,
// or its system call interrupted by a fatal signal) or that was already
// answered.
var ErrGone = errors.New("seccompnotify: the notification is no longer valid")

func (l *Listener) ioctl(req uintptr, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), req, uintptr(arg))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return ErrGone
		}
		return errno
	}
}

// receiveReady receives a notification that is waiting and fills n,
// without ever waiting in the kernel (where only a new notification, not
// Close, would end the wait): under recvMu, a listener that polls
// readable has a request counted, and SECCOMP_IOCTL_NOTIF_RECV then
// returns at once. It returns ErrGone when none is waiting (another
// receiver took it, or its caller went away).
func (l *Listener) receiveReady(n *Notif) error {
	l.recvMu.Lock()
	defer l.recvMu.Unlock()
	fds := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	for {
		k, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("seccompnotify: receive: %w", err)
		}
		if k == 0 || fds[0].Revents&unix.POLLIN == 0 {
			return ErrGone
		}
		break
	}
	*n = Notif{} // the kernel wants it zeroed
	err := l.ioctl(ioctlRecv, unsafe.Pointer(n))
	if err != nil && err != ErrGone {
		return fmt.Errorf("seccompnotify: receive: %w", err)
	}
	return err
}

// Valid reports whether notification id still waits for its answer: its
// caller is alive and in the same system call. Check it after reading
// the caller's memory or its /proc entries, which a pid reused by
// another thread would otherwise name.
func (l *Listener) Valid(id uint64) bool {
	return l.ioctl(ioctlIDValid, unsafe.Pointer(&id)) == nil
}

// Return answers id: the system call returns val.
func (l *Listener) Return(id uint64, val int64) error {
	r := resp{ID: id, Val: val}
	return l.ioctl(ioctlSend, unsafe.Pointer(&r))
}

// Fail answers id: the system call fails with errno.
func (l *Listener) Fail(id uint64, errno unix.Errno) error {
	r := resp{ID: id, Error: -int32(errno)}
	return l.ioctl(ioctlSend, unsafe.Pointer(&r))
}

// Continue answers id by letting the kernel run the system call as the
// caller made it. The kernel reads the caller's memory again, so a check
// made on what the supervisor read is no guarantee of what runs: use it
// only where no decision depends on that memory.
func (l *Listener) Continue(id uint64) error {
	r := resp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	return l.ioctl(ioctlSend, unsafe.Pointer(&r))
}

// SendFD answers id by installing a duplicate of fd (a descriptor of this
// process) in the caller, close-on-exec when cloexec, and making the
// system call return its number.
//
// It takes two steps, SECCOMP_IOCTL_NOTIF_ADDFD and then the answer,
// not the one of SECCOMP_ADDFD_FLAG_SEND: the kernel marks a
// notification answered when that flag's request is queued, before the
// caller installs the descriptor, and a signal to this thread while it
// waits for that withdraws the request, so the caller's system call
// returns 0 and the request made again fails with EINPROGRESS. An
// open(2) that returns 0 sends the command's writes to its standard
// input (TestSupervisorWritesUnderSignals). A plain ADDFD that a signal
// interrupts either was done (its number is returned) or was withdrawn
// with the notification still waiting, and is made again.
func (l *Listener) SendFD(id uint64, fd int, cloexec bool) error {
	a := addfd{ID: id, SrcFD: uint32(fd)}
	if cloexec {
		a.NewFDFlags = unix.O_CLOEXEC
	}
	for {
		n, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), ioctlAddFD, uintptr(unsafe.Pointer(&a)))
		switch errno {
		case 0:
			return l.Return(id, int64(n))
		case unix.EINTR:
			continue
		case unix.ENOENT:
			return ErrGone
		}
		return errno
	}
}

// ReadMemory reads len(b) bytes of thread tid's memory at addr. It
// returns how many it read: fewer at the end of a mapping.
func ReadMemory(tid int, addr uint64, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	for {
		n, err := unix.ProcessVMReadv(tid, local, remote, 0)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// ReadString reads the NUL-terminated string at addr of thread tid, of
// at most max bytes before its NUL. It fails with ENAMETOOLONG when no
// NUL comes within max bytes, and EFAULT when the memory ends first, as
// the kernel would for a path.
func ReadString(tid int, addr uint64, max int) (string, error) {
	if addr == 0 {
		return "", unix.EFAULT
	}
	const page = 4096
	buf := make([]byte, 0, 256)
	for len(buf) <= max {
		// Up to the end of the page: the next one may not be mapped.
		n := page - int(addr%page)
		chunk := make([]byte, n)
		got, err := ReadMemory(tid, addr, chunk)
		if got <= 0 {
			if err == nil {
				err = unix.EFAULT
			}
			return "", err
		}
		for i, c := range chunk[:got] {
			if c == 0 {
				return string(append(buf, chunk[:i]...)), nil
			}
		}
		buf = append(buf, chunk[:got]...)
		addr += uint64(got)
		if got < n {
			return "", unix.EFAULT
		}
	}
	return "", unix.ENAMETOOLONG
}

// Receiver receives the notifications of a Listener on one thread.
// Threads blocked in SECCOMP_IOCTL_NOTIF_RECV are all woken by each
// notification (the kernel's wait there is not exclusive), and all but
// one go back to sleep: a wasted wake-up of every idle thread per
// notified system call. A Receiver waits instead in an epoll instance of
// its own that watches the listener with EPOLLEXCLUSIVE, so that a
// notification wakes one waiting receiver.
type Receiver struct {
	l  *Listener
	ep int
}

// errClosed is returned by Receiver.Receive once the listener is closed,
// or hung up: no thread is left that its filter binds.
var errClosed = errors.New("seccompnotify: the listener is closed")

// NewReceiver returns a receiver of l's notifications, for one thread at
// a time. It is released when its Receive fails (the listener closed).
func (l *Listener) NewReceiver() (*Receiver, error) {
	if l.stop < 0 {
		return nil, errors.New("seccompnotify: receiver: no eventfd")
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("seccompnotify: receiver: %w", err)
	}
	add := func(fd int, events uint32) error {
		return unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)})
	}
	l.refs.Add(1)
	if err := add(l.stop, unix.EPOLLIN); err != nil {
		unix.Close(ep)
		l.release()
		return nil, fmt.Errorf("seccompnotify: receiver: %w", err)
	}
	if err := add(l.fd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE); err != nil {
		unix.Close(ep)
		l.release()
		return nil, fmt.Errorf("seccompnotify: receiver: %w", err)
	}
	return &Receiver{l: l, ep: ep}, nil
}

// end releases the receiver, and says why Receive returns.
func (r *Receiver) end() error {
	if r.ep >= 0 {
		unix.Close(r.ep)
		r.ep = -1
		r.l.release()
	}
	return errClosed
}

// Receive waits until the listener has a notification, receives it and
// fills n. It fails for good once the listener is closed or hung up.
func (r *Receiver) Receive(n *Notif) error {
	if r.ep < 0 {
		return errClosed
	}
	var evs [2]unix.EpollEvent
	for {
		k, err := unix.EpollWait(r.ep, evs[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			r.end()
			return fmt.Errorf("seccompnotify: receive: %w", err)
		}
		for _, ev := range evs[:k] {
			if int(ev.Fd) == r.l.stop {
				return r.end()
			}
			if ev.Events&unix.EPOLLHUP != 0 && ev.Events&unix.EPOLLIN == 0 {
				// The hang-up woke this receiver alone: wake the others.
				r.l.wake()
				return r.end()
			}
		}
		if k == 0 {
			continue
		}
		switch err := r.l.receiveReady(n); err {
		case nil:
			return nil
		case ErrGone:
			// Nothing to answer, or taken by another receiver: wait
			// again (a hang-up shows there).
		default:
			r.end()
			return err
		}
	}
}
