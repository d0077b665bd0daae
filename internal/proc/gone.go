//go:build linux

package proc

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// WaitGone waits until every process of ps has exited (a zombie
// counts), or d has passed, and reports whether all had. It waits on
// pidfds in the runtime's poller: no thread blocks and nothing is read
// from /proc meanwhile, so a kill that waits for what it signalled looks
// again once, when that is gone, instead of at every tick of a backoff
// (a burst of kills under load spent most of its CPU in such looks).
//
// Each process is pinned when the wait starts, by pid alone: one reaped
// since ps was read, its pid given to another process in between (the
// pid space wrapped around meanwhile), would be waited for until d, which
// callers keep short and follow with a fresh look. A process gone by
// then counts as exited. Without pollable pidfds (Linux before 5.10, or a
// filter that refuses them) it returns errors.ErrUnsupported at once.
func WaitGone(ps []Info, d time.Duration) (bool, error) {
	files := make([]*os.File, 0, len(ps))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, p := range ps {
		fd, err := unix.PidfdOpen(p.Pid, unix.PIDFD_NONBLOCK)
		switch err {
		case nil:
			files = append(files, os.NewFile(uintptr(fd), "pidfd"))
		case unix.ESRCH:
			// Gone, reaped.
		default:
			return false, errors.ErrUnsupported
		}
	}
	deadline := time.Now().Add(d)
	for _, f := range files {
		if err := f.SetReadDeadline(deadline); err != nil {
			return false, errors.ErrUnsupported // not in the poller
		}
		rc, err := f.SyscallConn()
		if err != nil {
			return false, errors.ErrUnsupported
		}
		// A pidfd reads as ready once its process has exited; the
		// poller calls this again at each readiness until it says so.
		err = rc.Read(func(fd uintptr) bool {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(pfd, 0)
			return n > 0 || err != nil && err != unix.EINTR
		})
		if err != nil {
			return false, nil // d passed
		}
	}
	return true, nil
}
