//go:build linux

package proc

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A process that scans often keeps each process's stat file open between
// scans (KeepStatFiles): a scan then reads the files it has with one
// pread each, where an open, a read and a close took three system calls.
// In a session's init, scans (on every SIGCHLD, kill and count) were
// about 40% of its CPU in a burst of kills, their opens and closes about
// half of that.
type statFiles struct {
	mu  sync.Mutex
	gen uint64
	fds map[int]statFile // by pid
	// dropped: no longer kept (a test's DropStatFiles); a scan that
	// loaded it before closes what it opened at its end.
	dropped bool
}

type statFile struct {
	fd  int
	gen uint64 // the last scan that read it
}

// maxStatFiles bounds the descriptors kept: past it, a scan opens and
// closes the others' files as before.
const maxStatFiles = 512

var keptStatFiles atomic.Pointer[statFiles]

// KeepStatFiles makes this process's scans keep the stat files they read
// open for the next scan, up to maxStatFiles. A file of a process that
// was reaped reads ESRCH, and is then closed and opened again by its
// path: a new process may hold the pid. For a process whose namespace is
// small and whose scans are many: a namespace's init.
func KeepStatFiles() {
	keptStatFiles.CompareAndSwap(nil, &statFiles{fds: make(map[int]statFile)})
}

// begin starts a scan's use of the files; end closes those of the
// processes the scan did not list.
func (f *statFiles) begin() {
	f.mu.Lock()
	f.gen++
}

func (f *statFiles) end() {
	for pid, sf := range f.fds {
		if sf.gen != f.gen || f.dropped {
			unix.Close(sf.fd)
			delete(f.fds, pid)
		}
	}
	f.mu.Unlock()
}

// stat is stat(pid, buf) through a kept file, between begin and end.
func (f *statFiles) stat(pid int, buf []byte) (Info, error) {
	if sf, ok := f.fds[pid]; ok {
		if info, err := readStat(sf.fd, pid, buf); err == nil {
			sf.gen = f.gen
			f.fds[pid] = sf
			return info, nil
		}
		// Reaped (ErrNotExist): the pid may be another process's by now.
		unix.Close(sf.fd)
		delete(f.fds, pid)
	}
	fd, err := openStat(pid)
	if err != nil {
		return Info{}, err
	}
	info, err := readStat(fd, pid, buf)
	if err != nil || len(f.fds) >= maxStatFiles {
		unix.Close(fd)
		return info, err
	}
	f.fds[pid] = statFile{fd: fd, gen: f.gen}
	return info, nil
}
