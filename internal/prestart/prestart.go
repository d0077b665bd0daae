//go:build linux

// Package prestart starts the init of `conch run`'s session while conch
// itself is still starting. In a build with cgo (the default), a
// constructor in early_linux.c does, before this process's Go runtime
// starts: the process is then small, with one thread, about 0.7 ms into
// its life. Otherwise this package's initialisation does, which needs
// only the standard library's first packages and so comes early, about
// halfway through the binary's initialisation (about 2.5 ms in). The
// init's clone, the exec of the binary and the Go runtime's start in it
// then run beside the rest of conch's start on another core, instead of
// after its flags, its configuration and the sandbox's plan
// (docs/containment.md#conch-run-starts-its-init-early).
//
// The init waits for its policy, as a spare does (nsinit.StartSpare);
// nsinit.Start takes it when its options are those of conch's own init,
// and a conch run that ends up needing no init (the configuration file
// turns containment off, a usage error) closes it. Nothing reaches the
// init before its policy, which travels over its socket as for any init.
package prestart

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// HelperArg is the hidden subcommand on which conch's binary runs an
// init (nsinit.HelperArg).
const HelperArg = "__init"

// SelfExe names the file this process runs. It is resolved by the kernel
// in the child between fork and exec (the child's /proc/self is a copy of
// this process, whose executable the kernel holds): a rename over the
// binary's path changes nothing it names, and the running file cannot be
// written in place (ETXTBSY) while this process runs it.
const SelfExe = "/proc/self/exe"

// Env is the environment of conch's init: its Go runtime's settings,
// read before its first instruction of Go code. One P (nsinit.Main says
// why), which the runtime then makes at its start instead of making one
// per CPU and destroying all but one at Main's call, a stop of the world
// and about 3 ms of page faults on this project's machine; and no
// collection until the init has set up and served a moment (nsinit.Main
// sets its target then). Commands get the environment their request
// names, never the init's.
var Env = []string{"GOMAXPROCS=1", "GOGC=off"}

// Process is an init's process started ahead, waiting for its policy.
type Process struct {
	Proc  *os.Process
	Conn  *os.File // this process's end of the init's socket
	NetNS bool     // it was cloned with a network namespace of its own
}

var (
	done = make(chan struct{}) // closed once the start has returned (or none was made)

	mu    sync.Mutex
	ahead *Process // started and not yet taken or closed
)

func init() {
	netNS, ok := wanted(os.Args[1:])
	if e, tried := early(); e != nil || tried {
		adopt(e, netNS, ok)
		return
	}
	if !ok {
		close(done)
		return
	}
	go func() {
		defer close(done)
		p, err := start(netNS)
		if err != nil {
			// The start proper will fail the same way and say why.
			return
		}
		mu.Lock()
		ahead = p
		mu.Unlock()
	}()
}

// earlyProcess is an init the constructor in early_linux.c started.
type earlyProcess struct {
	pid   int
	conn  *os.File
	execd int // a pipe's end that reads EOF once the child has exec'd or died
	netNS bool
}

// adopt makes the init the constructor started the one started ahead,
// if this package's reading of the command line wants it as it is
// (netNS, ok): the two readings are the same (TestEarlyWanted), but a
// process made by another start than this package's is checked, not
// trusted. Whatever it does not take, it ends.
func adopt(e *earlyProcess, netNS, ok bool) {
	if e == nil {
		close(done)
		return
	}
	if !ok || e.netNS != netNS {
		e.end()
		close(done)
		return
	}
	// The start is over once the child has exec'd, as os.StartProcess
	// returns (Wait's promise: the child no longer holds copies of
	// this process's descriptors). os.FindProcess holds it by a pidfd;
	// its first use checks that pidfds work (a vfork and a wait). Both
	// off the start's path.
	go func() {
		defer close(done)
		e.waitExec()
		p, err := os.FindProcess(e.pid)
		if err != nil {
			e.end()
			return
		}
		mu.Lock()
		ahead = &Process{Proc: p, Conn: e.conn, NetNS: e.netNS}
		mu.Unlock()
	}()
}

// waitExec returns once the child has exec'd (or died); the second
// call returns at once.
func (e *earlyProcess) waitExec() {
	if e.execd < 0 {
		return
	}
	var b [1]byte
	for {
		if _, err := syscall.Read(e.execd, b[:]); err != syscall.EINTR {
			break
		}
	}
	syscall.Close(e.execd)
	e.execd = -1
}

// end kills and reaps e.
func (e *earlyProcess) end() {
	e.waitExec()
	e.conn.Close()
	syscall.Kill(e.pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(e.pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}

// wanted reports whether args (without the program name) are a `conch
// run` that would start an init with the defaults of the flags it
// gives, and whether that init gets a network namespace. It reads only
// the flags: a configuration file that turns containment off makes conch
// close the process (Close); one that changes the network makes
// nsinit.Start close it and start another.
func wanted(args []string) (netNS, ok bool) {
	if len(args) < 2 || args[0] != "run" {
		return false, false
	}
	flags := map[string]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch name {
		case "h", "help":
			return false, false
		case "containment", "provider", "network", "sandbox":
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			flags[name] = value
		}
	}
	if flags["containment"] == "off" || flags["provider"] == "local" {
		return false, false
	}
	// The session's network namespace: every network mode but "on",
	// whose default is "on" under full-access and "public" otherwise;
	// and the default "public" runs as "on" where this user cannot open
	// the TUN device (egress.Probe).
	network, given := flags["network"]
	switch {
	case !given && flags["sandbox"] == "full-access":
		network = "on"
	case !given:
		network = "public"
	}
	netNS = network != "on"
	if network == "public" && !given && !tunUsable() {
		netNS = false
	}
	return netNS, true
}

// tunUsable reports whether this process can open the TUN device, as
// egress.Probe does.
var tunUsable = func() bool {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
}

// start clones and executes the init, as nsinit starts one.
func start(netNS bool) (*Process, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "nsinit-server"), os.NewFile(uintptr(fds[1]), "nsinit-init")
	defer theirs.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		ours.Close()
		return nil, err
	}
	defer null.Close()
	name, err := os.Executable()
	if err != nil {
		name = os.Args[0]
	}
	attr := Attr()
	if netNS {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	p, err := os.StartProcess(SelfExe, []string{name, HelperArg}, &os.ProcAttr{
		Env:   Env,
		Files: []*os.File{null, null, os.Stderr, theirs},
		Sys:   attr,
	})
	if err != nil {
		ours.Close()
		return nil, err
	}
	return &Process{Proc: p, Conn: ours, NetNS: netNS}, nil
}

// Take returns the process started ahead, once its start is over, and
// forgets it; nil if there is none (not a conch run, a failed start, or
// taken already). claim is called with its pid before it is forgotten,
// so that no orphan reaper takes it in between (Pending).
func Take(claim func(pid int)) *Process {
	<-done
	mu.Lock()
	defer mu.Unlock()
	p := ahead
	if p != nil {
		claim(p.Proc.Pid)
		ahead = nil
	}
	return p
}

// Pending reports whether pid is the process started ahead and not yet
// taken: its waiter is whoever takes it, not an orphan reaper.
func Pending(pid int) bool {
	<-done
	mu.Lock()
	defer mu.Unlock()
	return ahead != nil && ahead.Proc.Pid == pid
}

// Wait returns once the start is over: the fork's copies of this
// process's descriptors are gone with its exec, and this process may
// become non-dumpable (an unprivileged start writes the child's id maps
// while it is dumpable).
func Wait() { <-done }

// Close ends a process started ahead that nobody took, and waits until
// it is gone.
func Close() {
	<-done
	mu.Lock()
	p := ahead
	ahead = nil
	mu.Unlock()
	if p == nil {
		return
	}
	p.Conn.Close()
	p.Proc.Kill()
	p.Proc.Wait()
}

// Attr starts an init in new user, PID and mount namespaces, as pid 1,
// in a process group of its own in this process's session (its
// scheduling group: a session of its own cost every contained command
// two wake-ups across groups under load; the init leaves the session's
// controlling terminal at its start: docs/containment.md#spawning-and-waiting),
// mapping this process's uid and gid to
// themselves so that `id -u` and file owners read the same inside. Root
// maps every id it has to itself (identityMap); another user can map
// only its own, and must give up setgroups. A non-root init needs
// CAP_SYS_ADMIN (to mount /proc), CAP_SETPCAP (to shrink the commands'
// bounding set) and CAP_SYS_PTRACE (for the sandbox's supervisor to read
// a command that made itself non-dumpable, as ssh-agent does) and
// CAP_DAC_OVERRIDE (for overlayfs) after exec, which only ambient
// capabilities carry; the spawner thread clears them before it runs a
// command, and CAP_SYS_PTRACE leaves its bounding set.
func Attr() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	a := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if uid == 0 {
		a.UidMappings, a.GidMappings = identityMap("/proc/self/uid_map"), identityMap("/proc/self/gid_map")
		a.GidMappingsEnableSetgroups = setgroupsAllowed()
		return a
	}
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	// CAP_DAC_OVERRIDE: overlayfs works in its work directory, which it
	// makes mode 0, with the credentials of whoever mounted it (the
	// cache layer: docs/sandbox.md#the-cache-layer). CAP_NET_ADMIN: the
	// session's network namespace and its TUN device.
	const (
		capDacOverride = 1
		capSetpcap     = 8
		capNetAdmin    = 12
		capSysPtrace   = 19
		capSysAdmin    = 21
	)
	a.AmbientCaps = []uintptr{capSysAdmin, capSetpcap, capSysPtrace, capDacOverride, capNetAdmin}
	return a
}

// identityMap maps to themselves the ids this process's user namespace
// has: the ranges of its uid_map or gid_map (file), by their ids inside.
// In the initial namespace that is every id (0 0 4294967295); root of a
// namespace with a partial map (rootless podman, Kubernetes' hostUsers:
// false, `unshare -r`) has only its ranges, and a map of every id would
// be refused (docs/containment.md). A file that cannot be read gives
// every id, as before.
func identityMap(file string) []syscall.SysProcIDMap {
	all := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
	f, err := os.Open(file)
	if err != nil {
		return all
	}
	defer f.Close()
	var m []syscall.SysProcIDMap
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(fields[0], 10, 32)
		size, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil || size == 0 {
			continue
		}
		m = append(m, syscall.SysProcIDMap{ContainerID: int(inside), HostID: int(inside), Size: int(size)})
	}
	if len(m) == 0 {
		return all
	}
	return m
}

// setgroupsAllowed reports whether this process's user namespace allows
// setgroups: a child namespace cannot allow what its parent denies
// (`unshare -r` writes "deny").
func setgroupsAllowed() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err != nil || strings.TrimSpace(string(b)) != "deny"
}
