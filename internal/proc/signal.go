//go:build linux

package proc

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalName returns the conventional name of sig ("SIGTERM", "SIGKILL",
// …), or "SIG" and its number when it has none (e.g. "SIG40" for a
// real-time signal).
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// Signal sends sig to the process p describes, and only to it: the
// process is pinned with a pidfd and its start time compared with
// p.StartTime, so a pid that was reaped and reused since p was read is
// never signalled (it reports ErrNotExist, as does a process that is gone).
// On kernels without pidfds (before 5.3) it falls back to re-reading the
// start time and kill(2), which leaves a window of a few microseconds.
func Signal(p Info, sig syscall.Signal) error {
	if p.Pid <= 0 {
		return ErrNotExist
	}
	fd, err := unix.PidfdOpen(p.Pid, 0)
	switch err {
	case nil:
		defer unix.Close(fd)
		if !sameProcess(p) {
			return ErrNotExist
		}
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
		if err == unix.ESRCH {
			return ErrNotExist
		}
		return err
	case unix.ESRCH:
		return ErrNotExist
	case unix.ENOSYS, unix.EPERM:
		// No pidfds (old kernel, or a seccomp filter that refuses them).
		if !sameProcess(p) {
			return ErrNotExist
		}
		err = unix.Kill(p.Pid, sig)
		if err == unix.ESRCH {
			return ErrNotExist
		}
		return err
	default:
		return err
	}
}

func sameProcess(p Info) bool {
	now, err := Stat(p.Pid)
	return err == nil && now.StartTime == p.StartTime
}
