//go:build linux

package sandbox

import (
	"time"

	"golang.org/x/sys/unix"
)

// A connect the supervisor performs for the caller (socket_linux.go) is
// made without blocking and waited for here, with an eye on the caller:
// a blocking connect in a supervisor thread would outlive a caller
// killed meanwhile (a TCP handshake to a silent host takes the kernel
// about two minutes to give up; a unix listener that never accepts,
// forever), holding one of the supervisor's workers and the socket.
// What the caller sees is the blocking connect's answer: connected, the
// handshake's error, or, when its SO_SNDTIMEO runs out, EINPROGRESS (an
// internet socket) or EAGAIN (a unix one), as the kernel answers.

// connectRetryMax bounds the wait between tries of a unix connect whose
// listener's queue is full (nothing to poll for: the kernel wakes a
// blocking connector from the listener's side).
const connectRetryMax = 50 * time.Millisecond

// validEvery is how often a waiting connect checks that its caller still
// waits, when nothing else wakes it.
const validEvery = time.Second

// connectWait connects s, the supervisor's duplicate of the caller's
// socket, to sa, waiting as a blocking connect would when the socket is
// blocking.
func (c *call) connectWait(s, dom int, sa []byte) result {
	flags, err := unix.FcntlInt(uintptr(s), unix.F_GETFL, 0)
	if err != nil {
		return fail(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		return c.rawSock(s, unix.SYS_CONNECT, sa) // the caller's own non-blocking connect
	}
	r := c.connectNonblock(s, flags, sa)
	if !waits(r.errno, dom) {
		return r // done at once, as most are
	}
	deadline, err := sendTimeout(s)
	if err != nil {
		return fail(err)
	}
	pidfd, err := c.pidfd()
	if err == nil {
		defer unix.Close(pidfd)
	}
	switch {
	case !c.valid():
		return callerGone // and the pidfd, if any, is not surely the caller's
	case err != nil:
		return c.rawSock(s, unix.SYS_CONNECT, sa) // no pidfd to watch (EMFILE): the blocking connect
	}
	for wait := time.Millisecond; ; wait = min(2*wait, connectRetryMax) {
		switch r.errno {
		case unix.EINPROGRESS, unix.EALREADY:
			// EALREADY: an earlier connect's handshake, which a
			// blocking connect waits for too.
			return c.handshake(s, pidfd, deadline)
		case unix.EAGAIN: // only a unix socket's gets here (waits)
			// A unix listener's full queue: try again while the caller
			// lives and its timeout allows.
			left, timedOut := remaining(deadline)
			if timedOut {
				return r
			}
			if left < 0 || left > wait {
				left = wait
			}
			if exited(pidfd, left) || !c.valid() {
				return callerGone
			}
		default:
			return r
		}
		r = c.connectNonblock(s, flags, sa)
	}
}

// waits reports whether a non-blocking connect's errno means that a
// blocking one would wait: a handshake in progress, or a unix listener's
// full queue.
func waits(errno unix.Errno, dom int) bool {
	return errno == unix.EINPROGRESS || errno == unix.EALREADY || errno == unix.EAGAIN && dom == unix.AF_UNIX
}

// connectNonblock runs one connect with O_NONBLOCK set for its length on
// the open socket, which the caller shares (its F_GETFL may see the flag
// meanwhile: nothing it can use).
func (c *call) connectNonblock(s, flags int, sa []byte) result {
	if _, err := unix.FcntlInt(uintptr(s), unix.F_SETFL, flags|unix.O_NONBLOCK); err != nil {
		return fail(err)
	}
	r := c.rawSock(s, unix.SYS_CONNECT, sa)
	unix.FcntlInt(uintptr(s), unix.F_SETFL, flags)
	return r
}

// handshake waits for s's connection in progress to end, the caller to
// exit, or the deadline, and answers as the blocking connect would.
func (c *call) handshake(s, pidfd int, deadline time.Time) result {
	for {
		left, timedOut := remaining(deadline)
		if timedOut {
			return result{errno: unix.EINPROGRESS, fd: -1}
		}
		// The caller's thread can also go while its process lives on
		// (another thread's execve ends every other thread): its call
		// is checked at least every second.
		ms := int(validEvery.Milliseconds())
		if left >= 0 && left < validEvery {
			ms = int(left.Milliseconds()) + 1
		}
		fds := []unix.PollFd{{Fd: int32(s), Events: unix.POLLOUT}, {Fd: int32(pidfd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, ms); err != nil && err != unix.EINTR {
			return fail(err)
		}
		if fds[1].Revents != 0 {
			return callerGone // the handshake goes on, as it would for a killed caller's socket
		}
		if fds[0].Revents == 0 {
			if !c.valid() {
				return callerGone
			}
			continue
		}
		soerr, err := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return fail(err)
		}
		if soerr != 0 {
			return result{errno: unix.Errno(soerr), fd: -1}
		}
		return ok
	}
}

// sendTimeout is the deadline s's SO_SNDTIMEO sets a blocking connect,
// or the zero time for none.
func sendTimeout(s int) (time.Time, error) {
	tv, err := unix.GetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return time.Time{}, err
	}
	if tv.Sec == 0 && tv.Usec == 0 {
		return time.Time{}, nil
	}
	return time.Now().Add(time.Duration(tv.Nano())), nil
}

// remaining is the time left before deadline (-1 for none), and whether
// it has passed.
func remaining(deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return -1, false
	}
	left := time.Until(deadline)
	return left, left <= 0
}

// exited waits up to d for the process of pidfd to exit, and reports
// whether it did.
func exited(pidfd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d.Milliseconds())+1)
	return err == nil && n > 0
}
