//go:build linux

package sandbox

import (
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Mount applies the mount half of plan. It must run in a private mount
// namespace of its own, with CAP_SYS_ADMIN there, before Restrict (which
// forbids mounting): each pinned git directory is bound onto itself
// (read-write: a mount point cannot be renamed or removed), each
// protected path is bind-mounted onto itself and
// remounted read-only (a file as well as a directory: Landlock rules can
// only add rights, so a read-only spot inside a writable root needs a
// mount), each hidden path is covered (HideExcept, keeping the writable
// roots inside it), and each denyRead path is covered by an empty
// read-only tmpfs (a directory) or a read-only bind of /dev/null (a
// file). Paths that do not exist are skipped.
func Mount(plan *Plan) error {
	if plan.Mode == FullAccess {
		return nil
	}
	// Pinned first: the read-only binds inside them must be made on the
	// pinned mount, not hidden under it.
	for _, p := range plan.Pinned {
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("sandbox: pin %s: %w", p, err)
		}
	}
	for _, p := range plan.Protected {
		if err := BindReadOnly(p, p); err != nil {
			return fmt.Errorf("sandbox: protect %s: %w", p, err)
		}
	}
	// conch's own: after the protected paths, which may lie inside
	// (conch's configuration in a writable home).
	for _, p := range plan.Hidden {
		if err := hide(p, plan.Writable); err != nil {
			return fmt.Errorf("sandbox: hide %s: %w", p, err)
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
			err = BindReadOnly(os.DevNull, p)
		}
		if err != nil {
			return fmt.Errorf("sandbox: hide %s: %w", p, err)
		}
	}
	return nil
}

// BindReadOnly binds from onto to, then remounts the bind read-only. In a
// user namespace the remount must keep the flags the kernel locked on
// the original mount (nosuid, nodev, noexec, atime), so they are read
// back and kept.
func BindReadOnly(from, to string) error {
	return bind(from, to, unix.MS_RDONLY)
}

// bind binds from over to (recursively), then remounts the bind with
// the flags add (MS_RDONLY, MS_NOSUID, MS_NODEV) beside those of the
// original mount, which a user namespace may not drop (read back with
// statfs): a bind's own flags are ignored when it is made.
func bind(from, to string, add uintptr) error {
	if err := unix.Mount(from, to, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(to, &st); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	flags := unix.MS_BIND | unix.MS_REMOUNT | add
	for _, f := range [][2]uintptr{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	if err := unix.Mount("", to, "", flags, ""); err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	return nil
}

// Restrict applies the Landlock half of plan to the calling thread only
// (restrictThread says why), then sets no_new_privs and loads, on that
// thread too, the seccomp filter of loadSyscallFilter (which hands the
// writes and socket calls of commands to the supervisor, see Supervise);
// commands forked from that thread inherit all of it. Landlock:
// everything readable and executable, writable only in plan.Writable
// (with REFER where the ABI has it: landlockRules) and a few devices
// (/dev/null, /dev/zero, /dev/full, /dev/tty, /dev/ptmx, /dev/pts,
// /dev/shm), and with the network off, TCP bind and connect denied (the
// empty network namespace denies the rest).
//
// It returns what this host could not enforce, each with its cause.
func Restrict(plan *Plan) (unenforced []string, err error) {
	if plan.Mode == FullAccess {
		return nil, nil
	}
	abi, abiErr := llsys.LandlockGetABIVersion()
	switch {
	case abiErr != nil:
		unenforced = append(unenforced, fmt.Sprintf(UnenforcedFiles+" (Landlock unavailable: %v)", abiErr))
	case abi < 4 && plan.Network == NetworkOff:
		unenforced = append(unenforced, fmt.Sprintf("TCP by Landlock (ABI %d < 4; the empty network namespace still holds)", abi))
	}
	rules := landlockRules(abi, reachable(plan.Writable))
	// No IPC scopes: before ABI 8, go-landlock restricts each thread on
	// its own, so the init's threads end up in sibling domains, and with
	// a scope on signals the init's other threads could no longer manage
	// the commands its spawner thread forked (tried here: a terminated
	// command's exit was never reported). Landlock restricts TCP only in the
	// rule sets that handle it.
	cfg := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS}
	if plan.Network == NetworkOff {
		cfg.HandledAccessNet = landlock.V7.HandledAccessNet
	}
	cfg = cfg.BestEffort()
	if err := restrictThread(cfg, rules...); err != nil {
		return nil, fmt.Errorf("sandbox: landlock: %w", err)
	}
	// Landlock sets it when the kernel has Landlock; the filter below
	// needs it too.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	return loadSyscallFilter(plan, unenforced)
}

// landlockRules are the rules of Restrict on a kernel of Landlock ABI abi
// (0: none): everything readable and executable; writable, writable
// and the devices a command may write, the session's own terminals
// among them (the init mounted /dev/pts and /dev/ptmx: see nsinit).
// From ABI 2 the writable directories also get REFER, so that rename(2)
// and link(2) work between them (git mv, a wheel build, git push to a
// file remote); a protected path stays out of reach, being a mount of
// its own (EXDEV). Below ABI 2 REFER is left out: asked for there, a
// best-effort ruleset would drop Landlock altogether.
func landlockRules(abi int, writable []string) []landlock.Rule {
	rw := landlock.RWDirs(writable...).IgnoreIfMissing()
	if abi >= 2 {
		rw = rw.WithRefer()
	}
	return []landlock.Rule{
		landlock.RODirs("/"),
		rw,
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts", "/dev/shm").WithIoctlDev().IgnoreIfMissing(),
	}
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
	return HostSupport{LandlockABI: abi, LandlockErr: err, Seccomp: seccompAvailable()}
}

// reachable are the dirs this process can open: Landlock needs a
// descriptor of each, and a directory its user cannot reach (under
// another user's private directory) is one its commands could not write
// anyway. Missing ones are kept for IgnoreIfMissing.
func reachable(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		if err != unix.EACCES {
			out = append(out, d)
		}
	}
	return out
}
