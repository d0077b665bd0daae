//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Info is one process as /proc/<pid>/stat describes it at one instant.
type Info struct {
	Pid, PPid, Pgid, Sid int
	// TTY is the controlling terminal's device number (tty_nr), 0 for
	// none.
	TTY int
	// State is the one-letter state: R, S, D, T, t, Z (zombie: exited, not
	// reaped), X (dead), I, …
	State byte
	// StartTime is the start time in clock ticks since boot. Together with
	// Pid it names one process for good: a reused pid has a later
	// StartTime.
	StartTime uint64
	// Comm is the executable name the kernel keeps (at most 15 bytes; any
	// bytes, spaces and ')' included).
	Comm string
	// NumThreads counts the threads of the process, a zombie leader
	// included.
	NumThreads int
}

// Alive reports whether the process can still run code: it is neither a
// zombie nor dead. A zombie thread-group leader whose other threads still
// run (the main thread called pthread_exit) is alive.
func (p Info) Alive() bool {
	switch p.State {
	case 'X':
		return false
	case 'Z':
		return p.NumThreads > 1
	}
	return true
}

// ErrNotExist is returned by Stat and Signal when there is no such process
// (it never existed, or it was reaped).
var ErrNotExist = errors.New("proc: no such process")

// statBufSize holds any stat line: about 52 numbers of at most 20 digits,
// plus a comm of at most 64 bytes.
const statBufSize = 2048

// Stat reads /proc/<pid>/stat.
func Stat(pid int) (Info, error) {
	var buf [statBufSize]byte
	return stat(pid, buf[:])
}

func stat(pid int, buf []byte) (Info, error) {
	fd, err := openStat(pid)
	if err != nil {
		return Info{}, err
	}
	info, err := readStat(fd, pid, buf)
	unix.Close(fd)
	return info, err
}

// openStat opens /proc/<pid>/stat; ErrNotExist when there is no such
// process.
func openStat(pid int) (int, error) {
	fd, err := unix.Open(statPath(pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ENOENT || err == unix.ESRCH {
			return -1, ErrNotExist
		}
		return -1, fmt.Errorf("proc: open %s: %w", statPath(pid), err)
	}
	return fd, nil
}

// readStat reads and parses pid's stat file open at fd; ErrNotExist once
// the process was reaped.
func readStat(fd, pid int, buf []byte) (Info, error) {
	n, err := readFull(fd, buf)
	if err != nil {
		if err == unix.ESRCH {
			return Info{}, ErrNotExist
		}
		return Info{}, fmt.Errorf("proc: read %s: %w", statPath(pid), err)
	}
	info, err := parseStat(buf[:n])
	if err != nil {
		return Info{}, fmt.Errorf("proc: parse %s: %w", statPath(pid), err)
	}
	return info, nil
}

func statPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/stat" }

// readFull reads the stat line whole. procfs serves it through seq_file,
// which copies a record whole when the buffer holds it and then returns
// what it has, so a read that leaves room in buf is the end of the file:
// no second read to see EOF (a scan makes one system call fewer per
// process). A read that fills buf is read on from, until EOF or buf is
// full. It reads from the file's start (pread), whatever was read of it
// before: a stat file kept open (KeepStatFiles) is read again at each
// scan.
func readFull(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 || m < len(buf)-n {
			return n + m, nil
		}
		n += m
	}
	return n, io.ErrShortBuffer
}

// parseStat parses a /proc/<pid>/stat line. The comm field is wrapped in
// parentheses but may itself contain spaces, '(' and ')', so it ends at the
// LAST ')' of the line; every field after it is a plain token.
func parseStat(line []byte) (Info, error) {
	open := bytes.IndexByte(line, '(')
	end := bytes.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return Info{}, errors.New("no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(line[:open])))
	if err != nil {
		return Info{}, fmt.Errorf("pid: %w", err)
	}
	info := Info{Pid: pid, Comm: string(line[open+1 : end])}
	// Fields after comm, numbered from 0: 0 state, 1 ppid, 2 pgrp,
	// 3 session, 4 tty_nr, …, 17 num_threads, 19 starttime (proc(5)
	// fields 3..22).
	rest := line[end+1:]
	for i := 0; i <= 19; i++ {
		rest = bytes.TrimLeft(rest, " ")
		tok := rest
		if sp := bytes.IndexAny(rest, " \n"); sp >= 0 {
			tok, rest = rest[:sp], rest[sp:]
		} else {
			rest = nil
		}
		if len(tok) == 0 {
			return Info{}, fmt.Errorf("field %d missing", i+3)
		}
		if i == 0 {
			if len(tok) != 1 {
				return Info{}, fmt.Errorf("state %q", tok)
			}
			info.State = tok[0]
			continue
		}
		var dst *int
		switch i {
		case 1:
			dst = &info.PPid
		case 2:
			dst = &info.Pgid
		case 3:
			dst = &info.Sid
		case 4:
			dst = &info.TTY
		case 17:
			dst = &info.NumThreads
		case 19:
			v, err := strconv.ParseUint(string(tok), 10, 64)
			if err != nil {
				return Info{}, fmt.Errorf("starttime: %w", err)
			}
			info.StartTime = v
		}
		if dst != nil {
			v, err := strconv.Atoi(string(tok))
			if err != nil {
				return Info{}, fmt.Errorf("field %d: %w", i+3, err)
			}
			*dst = v
		}
	}
	return info, nil
}

// scans counts the calls of Scan, for tests.
var scans atomic.Int64

// exhausted reports whether err is the want of a resource (descriptors,
// memory) rather than something about the process read.
func exhausted(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM)
}

// Scan returns every process in /proc (thread-group leaders; threads are
// not listed). A process that vanishes between the listing and the read is
// skipped; one that cannot be read for want of descriptors or memory
// fails the scan (a list without it would say it is gone). The result is
// a snapshot: a process forked after the listing is missing from it even
// if its parent exits before its own line is read, so callers that
// conclude "nothing is left" from one Scan should confirm with a second
// one.
//
// Concurrent callers share scans, as GroupAlive's callers do: each gets
// one that started after its call (a copy of its own), the same one as
// the callers that asked before it started. A namespace's init, whose
// reaper, kills, counts and group waits all scan, so makes one scan for
// the kills of a burst that asked at the same moment.
func Scan() ([]Info, error) {
	var infos []Info
	var err error
	groupScans.do(func(s *snapshot) { infos, err = slices.Clone(s.infos), s.err })
	return infos, err
}

// scan makes one scan of /proc, for Scan and the shared rounds.
func scan() ([]Info, error) {
	scans.Add(1)
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("proc: scan: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("proc: scan: %w", err)
	}
	kept := keptStatFiles.Load()
	if kept != nil {
		kept.begin()
		defer kept.end()
	}
	var buf [statBufSize]byte
	infos := make([]Info, 0, len(names))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		var info Info
		if kept != nil {
			info, err = kept.stat(pid, buf[:])
		} else {
			info, err = stat(pid, buf[:])
		}
		if err != nil {
			if exhausted(err) {
				// A process we could not read, not one that is gone: a
				// kill that took this list for all would stop early.
				return nil, fmt.Errorf("proc: scan: %w", err)
			}
			// Gone between the listing and the read, not ours to read
			// (hidepid), or a line we cannot parse: none is a process
			// we could act on.
			continue
		}
		infos = append(infos, info)
	}
	return infos, nil
}
