//go:build linux

package sandbox

import (
	"fmt"
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

func access(path string) bool { return unix.Access(path, unix.W_OK) == nil }

// Mount applies the mount half of plan. It must run in a private mount
// namespace of its own, with CAP_SYS_ADMIN there, before Restrict (which
// forbids mounting): each protected path is bind-mounted onto itself and
// remounted read-only (a file as well as a directory: Landlock rules can
// only add rights, so a read-only spot inside a writable root needs a
// mount), and each denyRead path is covered by an empty read-only tmpfs
// (a directory) or a read-only bind of /dev/null (a file). Paths that do
// not exist are skipped.
func Mount(plan *Plan) error {
	if plan.Mode == FullAccess {
		return nil
	}
	for _, p := range plan.Protected {
		if err := bindReadOnly(p, p); err != nil {
			return fmt.Errorf("sandbox: protect %s: %w", p, err)
		}
	}
	for _, p := range plan.DenyRead {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
		} else {
			err = bindReadOnly(os.DevNull, p)
		}
		if err != nil {
			return fmt.Errorf("sandbox: hide %s: %w", p, err)
		}
	}
	return nil
}

// bindReadOnly binds from onto to, then remounts the bind read-only. In a
// user namespace the remount must keep the flags the kernel locked on
// the original mount (nosuid, nodev, noexec, atime), so they are read
// back and kept.
func bindReadOnly(from, to string) error {
	if err := unix.Mount(from, to, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(to, &st); err != nil {
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
	if err := unix.Mount("", to, "", flags, ""); err != nil {
		return fmt.Errorf("remount read-only: %w", err)
	}
	return nil
}

// Restrict applies the Landlock half of plan to the whole calling process
// (every thread) and, on the calling thread only, the seccomp filter
// on unix sockets, then sets no_new_privs; commands forked from that
// thread inherit all of it. Landlock: everything readable and
// executable, writable only in plan.Writable and a few devices
// (/dev/null, /dev/zero, /dev/full, /dev/tty, /dev/pts, /dev/shm), and
// with the network off, TCP bind and connect denied (the empty network
// namespace denies the rest). Seccomp: socket(AF_UNIX) fails with EACCES
// unless plan.UnixSockets lists some (seccomp cannot see a path; see
// Unenforced).
//
// It returns what this host could not enforce, each with its cause.
func Restrict(plan *Plan) (unenforced []string, err error) {
	if plan.Mode == FullAccess {
		return nil, nil
	}
	abi, abiErr := llsys.LandlockGetABIVersion()
	switch {
	case abiErr != nil:
		unenforced = append(unenforced, fmt.Sprintf("file sandbox (Landlock unavailable: %v)", abiErr))
	case abi < 4 && plan.Network == NetworkOff:
		unenforced = append(unenforced, fmt.Sprintf("TCP by Landlock (ABI %d < 4; the empty network namespace still holds)", abi))
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs(plan.Writable...).IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts", "/dev/shm").WithIoctlDev().IgnoreIfMissing(),
	}
	// No IPC scopes: before ABI 8, go-landlock restricts each thread on
	// its own, so the init's threads end up in sibling domains, and a
	// scope on signals then lost the exits of commands killed from
	// another thread (measured here). Landlock restricts TCP only in the
	// rule sets that handle it.
	cfg := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS}
	if plan.Network == NetworkOff {
		cfg.HandledAccessNet = landlock.V7.HandledAccessNet
	}
	cfg = cfg.BestEffort()
	if err := cfg.Restrict(rules...); err != nil {
		return nil, fmt.Errorf("sandbox: landlock: %w", err)
	}
	if len(plan.UnixSockets) > 0 {
		unenforced = append(unenforced, "unix sockets by path (seccomp cannot see a path; all unix sockets allowed)")
		return unenforced, nil
	}
	if !seccomp.Supported() {
		return append(unenforced, "unix sockets (seccomp unavailable)"), nil
	}
	filter := seccomp.Filter{
		NoNewPrivs: true,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | seccomp.Action(unix.EACCES),
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "socket",
					Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX}},
				}},
			}},
		},
	}
	if err := seccomp.LoadFilter(filter); err != nil {
		return nil, fmt.Errorf("sandbox: seccomp: %w", err)
	}
	return unenforced, nil
}

// HostSupport says what this host gives the sandbox, for `conch doctor`:
// the Landlock ABI (0 and an error when there is none) and whether
// seccomp filters load.
type HostSupport struct {
	LandlockABI int
	LandlockErr error
	Seccomp     bool
}

// Probe reports HostSupport without restricting anything.
func Probe() HostSupport {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		err = fmt.Errorf("landlock: %w", err)
	}
	return HostSupport{LandlockABI: abi, LandlockErr: err, Seccomp: seccomp.Supported()}
}
