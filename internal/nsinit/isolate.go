//go:build linux

package nsinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a session must not share with the host or with other sessions,
// whatever its sandbox mode (full-access included: docs/containment.md#what-a-command-sees-and-holds).
// Each is made once, in the init's own mount namespace, before the sandbox.

// isolate gives the session its own devpts instance and /dev/ptmx, its
// own /dev/shm of at most shm bytes, a new session keyring, and makes the
// cgroup file systems read-only.
func isolate(shm int64) error {
	if err := privatePTYs(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := privateShm(shm); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := readOnlyCgroups(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := newSessionKeyring(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

// privatePTYs mounts a new devpts instance on /dev/pts and binds its ptmx
// over /dev/ptmx: a command sees, opens and allocates only the session's
// own terminals, never one of the host's (a user's shell, where it could
// read what the user types) or another session's.
func privatePTYs() error {
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"); err != nil {
		return fmt.Errorf("mount a devpts instance of the session's own: %w", err)
	}
	if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the session's /dev/ptmx: %w", err)
	}
	return nil
}

// privateShm mounts an empty tmpfs of size bytes on /dev/shm: what a
// command leaves there is bounded and ends with the session.
func privateShm(size int64) error {
	if size <= 0 {
		size = MaxShmBytes
	}
	opts := "mode=1777,size=" + strconv.FormatInt(size, 10)
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the session's /dev/shm: %w", err)
	}
	return nil
}

// newSessionKeyring joins this thread (the spawner, whose credentials
// the commands inherit) to a new anonymous session keyring: the keys of
// the user's login session are no longer possessed, so a command cannot
// read them. (The user keyring belongs to the user namespace: the init's
// is new and empty.)
func newSessionKeyring() error {
	// A NULL name makes an anonymous keyring; x/sys's wrapper would pass
	// "", a name that other processes could join.
	if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
		if errno == unix.ENOSYS {
			return nil // a kernel without keys has none to leak
		}
		return fmt.Errorf("join a new session keyring: %w", errno)
	}
	return nil
}

// readOnlyCgroups remounts every cgroup file system the init sees
// read-only: a command cannot move itself out of its cgroup and past
// --max-pids or --max-memory, even as root under full-access. The
// server's own descriptors into the cgroup tree (the limits, clone3's
// cgroup) are the host's mounts and keep working.
func readOnlyCgroups() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		err := remountReadOnly(m)
		if errors.Is(err, unix.EACCES) {
			// Under a directory the init's user may not search (a pod's
			// hostPath volume over the runtime's own cgroup mounts): the
			// commands, the same user with no capability over it, cannot
			// reach it either.
			continue
		}
		if err != nil {
			return fmt.Errorf("make %s read-only: %w", m, err)
		}
	}
	return nil
}

// cgroupMounts lists the mount points of cgroup and cgroup2 file systems
// in /proc/self/mountinfo.
func cgroupMounts() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		if t := fields[sep+1]; t == "cgroup" || t == "cgroup2" {
			out = append(out, unescapeMountinfo(fields[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remountReadOnly makes the mount at path read-only, keeping the flags
// the kernel locked on it when the namespace was made (in a user
// namespace a remount may add restrictions, never drop one).
func remountReadOnly(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range [][2]uintptr{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	return unix.Mount("", path, "", flags, "")
}

// openPTY opens a new terminal of the session's devpts instance: the
// init's /dev/ptmx is the instance's (privatePTYs).
func openPTY() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	// TIOCGPTPEER opens the slave through the master, by no path.
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		unix.Close(m)
		return nil, nil, fmt.Errorf("open the terminal's slave: %w", errno)
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(uintptr(s), "/dev/pts"), nil
}

// setName sets the process's name (its comm, what ps shows), at most 15
// bytes of name.
func setName(name string) {
	if len(name) > 15 {
		name = name[:15]
	}
	// The process's name is its first thread's, which PR_SET_NAME names
	// only when called there; the goroutine calling may be on another
	// thread (main.main is not bound to the first one, and a loaded
	// machine moves it: pid 1 was seen as "exe"). /proc/self/comm is the
	// first thread's, writable from any thread of the process.
	if os.WriteFile("/proc/self/comm", []byte(name), 0) == nil {
		return
	}
	b := append([]byte(name), 0)
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
}
