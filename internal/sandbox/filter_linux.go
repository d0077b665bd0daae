//go:build linux

package sandbox

import (
	"fmt"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/seccompnotify"
)

// Unenforced entries when the supervisor cannot run.
const (
	// UnenforcedSupervisor begins the entry of a host without seccomp
	// user notification: no denial record (so no markers), no
	// protection of git files that do not exist yet, no unix socket
	// allowed by its path.
	UnenforcedSupervisor = "the supervisor (denial markers, git files not yet created, unix sockets by path)"
)

// loadPlainFilter loads the filter of an architecture without a system
// call table here (syscalls_other.go); nil where there is one, which
// never calls it: the library that assembles it (go-seccomp-bpf) builds
// its tables of every architecture's system calls at start-up, about
// 1 ms and 160 kB in every conch process, inits and agents included.
var loadPlainFilter func(plan *Plan, unenforced []string) ([]string, error)

// seccompAvailable reports whether this kernel has seccomp(2) and lets
// this process call it: strict mode refuses the flag 1 with EINVAL when
// it does.
func seccompAvailable() bool {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, 0 /* SECCOMP_SET_MODE_STRICT */, 1, 0)
	return errno == unix.EINVAL
}

// SupervisorUnavailable says why this host cannot run the supervisor
// (nil: it can).
func SupervisorUnavailable() error {
	if len(sysABIs) == 0 {
		return fmt.Errorf("no system call table for %s", runtimeArch())
	}
	return seccompnotify.Supported()
}

// loadSyscallFilter loads the sandbox's seccomp filter on the calling
// thread (no_new_privs set): with the supervisor (a host with user
// notification), the filter of filterABIs that hands the commands'
// writes and socket calls to it, its listener kept for Supervise; else
// one that refuses unix sockets (every one, or none when plan lists
// some, which it cannot tell apart). It returns unenforced with what
// this host cannot enforce added.
func loadSyscallFilter(plan *Plan, unenforced []string) ([]string, error) {
	why := SupervisorUnavailable()
	if len(sysABIs) == 0 {
		return loadPlainFilter(plan, append(unenforced, fmt.Sprintf("%s (%v)", UnenforcedSupervisor, why)))
	}
	supervised := why == nil
	allowUnix := !supervised && len(plan.UnixSockets) > 0
	prog, err := seccompnotify.Program(filterABIs(supervised, supervised && len(plan.DenyRead) > 0, allowUnix))
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp: %w", err)
	}
	l, err := seccompnotify.Load(prog, supervised)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp: %w", err)
	}
	if !supervised {
		unenforced = append(unenforced, fmt.Sprintf("%s (%v)", UnenforcedSupervisor, why))
		if allowUnix {
			unenforced = append(unenforced, "unix sockets by path (seccomp cannot see a path; all unix sockets allowed)")
		}
		return unenforced, nil
	}
	pendingMu.Lock()
	if pendingListener != nil {
		pendingListener.Close()
	}
	pendingListener = l
	pendingMu.Unlock()
	// Without Landlock the supervisor still judges every write by its
	// path: the file sandbox holds.
	out := unenforced[:0]
	for _, u := range unenforced {
		if !strings.HasPrefix(u, UnenforcedFiles+" (Landlock unavailable") {
			out = append(out, u)
		}
	}
	return out, nil
}

// WatchNetwork prepares, on the calling thread (which must have
// CAP_SYS_ADMIN in its user namespace: no no_new_privs is set), the
// supervisor of a full-access plan with the network off, which restricts
// no file or socket: a filter that hands it every connect, so that a
// refused one is recorded (the empty network namespace refuses it).
// Supervise then starts it. Nothing is done for another plan, or on a
// host without the supervisor.
func WatchNetwork(plan *Plan) error {
	if plan.Mode != FullAccess || plan.Network != NetworkOff || SupervisorUnavailable() != nil {
		return nil
	}
	var abis []seccompnotify.ABI
	for _, a := range sysABIs {
		abi := seccompnotify.ABI{Arch: a.arch}
		for nr, op := range a.ops {
			if op == sysConnect {
				abi.Rules = append(abi.Rules, seccompnotify.Rule{Nr: nr, Action: seccompnotify.Notify})
			}
		}
		abis = append(abis, abi)
	}
	prog, err := seccompnotify.Program(abis)
	if err != nil {
		return fmt.Errorf("sandbox: seccomp: %w", err)
	}
	l, err := seccompnotify.Load(prog, true)
	if err != nil {
		return fmt.Errorf("sandbox: seccomp: %w", err)
	}
	pendingMu.Lock()
	pendingListener = l
	pendingMu.Unlock()
	return nil
}

// restrictThread enforces cfg and rules with Landlock on the calling
// thread only, which must be locked to its goroutine for good (the
// init's spawner: every command it forks inherits the domain).
//
// Not on every thread of the init, as go-landlock's Config.Restrict
// does: before Landlock ABI 8, each thread restricted on its own gets a
// domain of its own, a sibling of the others, and Landlock denies a
// thread every ptrace-class access (reading memory, its descriptors,
// /proc/<pid>/cwd) to a process outside its domain and those below: the
// supervisor, on other threads, could not reach the commands. Its
// threads act with the command's rights otherwise (docs/sandbox.md#the-supervisor).
func restrictThread(cfg landlock.Config, rules ...landlock.Rule) error {
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return nil // nothing this kernel enforces
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

func runtimeArch() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "this architecture"
	}
	return unix.ByteSliceToString(u.Machine[:])
}
