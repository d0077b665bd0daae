//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/sandbox"
)

// initFD is the descriptor on which the init finds its end of the socket
// (the first of exec.Cmd.ExtraFiles).
const initFD = 3

// gcAfter is how long after it is ready the init collects its garbage
// at all (Main).
const gcAfter = time.Second

// Main is the init: the program the server's binary runs when it was
// re-executed by Start (conch dispatches it from a hidden subcommand,
// tests from TestMain). It returns the process's exit status, once the
// server has closed the socket or died; everything left in the namespace
// dies with it.
func Main() int {
	// The signals are caught beside the rest of the start
	// (catchSignals): setUp waits for them before the init says it is
	// ready.
	signals := make(chan chan os.Signal, 1)
	go catchSignals(signals)
	// This goroutine serves requests and forks commands: it keeps its
	// thread, whose credentials differ (see dropCapabilities), and reads
	// the socket with blocking calls, so that a request wakes this very
	// thread, which forks at once.
	runtime.LockOSThread()
	// One P. The init's goroutines spend their time in system calls (the
	// socket, forks, waits, the supervisor's notifications), not in Go
	// code; with a second P every goroutine made runnable woke a spinning
	// thread to look for it, and a thread blocked in a system call held
	// its P for up to 10 ms, the Go runtime's sysmon polling all along.
	// With one, sysmon takes the P back within a tick or two, and nothing
	// spins: a command under the default sandbox runs about 5% faster
	// (docs/containment.md#the-init-runs-on-one-p). conch's init has it
	// from its start (prestart.Env): this call is then free, and serves
	// an init started with another environment.
	runtime.GOMAXPROCS(1)
	// Started as /proc/self/exe, it would be called "exe" in ps.
	setName(filepath.Base(os.Args[0]))
	// No collection while it sets up: at its running target (below) the
	// set-up's allocations would trigger several, on the path of the
	// session's first command. conch's init starts so (prestart.Env).
	debug.SetGCPercent(-1)
	// Descriptors the server's own parent leaked to it without
	// close-on-exec reached the init through the exec: they must not
	// reach the commands.
	if err := closeOnExecFrom(initFD); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := &conn{rw: fdConn(initFD)}
	s := &initState{c: c, cmds: make(map[int]*command), owners: make(map[procKey][]*command), signals: signals}
	m, fds, err := c.recv()
	if err != nil {
		return 1
	}
	s.home = fds // close-on-exec, as every descriptor received
	if m.Op != opPolicy {
		c.send(&message{Op: opFail, Err: fmt.Sprintf("init: first message %q, want %q", m.Op, opPolicy)})
		return 1
	}
	s.net = m.Net
	unenforced, cacheLayer, err := s.setUp(m)
	if err != nil {
		c.send(&message{Op: opFail, Err: err.Error()})
		return 1
	}
	ready := &message{Op: opReady, Unenforced: unenforced, CacheLayer: cacheLayer}
	if s.netReady != nil {
		ready.TUN, ready.Listening = s.netReady.TUN, s.netReady.Listening
	}
	err = c.send(ready, s.netFiles...)
	s.closeNetFiles()
	if err != nil {
		return 1
	}
	// The init holds little: a few records per command. A low GC target
	// keeps its resident memory near the runtime's floor. Set at once,
	// it collected the set-up's garbage (all of the heap) at the first
	// request's first allocation, on the path of the session's first
	// command (2 ms of a `conch run -- true` here); a second after ready
	// the session is at rest, or busy enough that one collection is
	// noise.
	// A session's second spawn sets it at once, when it comes within
	// that second: a burst of commands there ran with no collection
	// (200 tasks started at once grew the init by 9–19 KiB each, 9–13
	// with this; 6–10 when the target was set at ready:
	// BenchmarkTaskMemory).
	s.gcTarget = sync.OnceFunc(func() { debug.SetGCPercent(20) })
	time.AfterFunc(gcAfter, s.gcTarget)
	// Its reaper, kills and counts scan its /proc again and again, a
	// session's few processes: their stat files stay open between scans.
	proc.KeepStatFiles()
	s.serve()
	return 0
}

// leaveTerminal detaches the init, and so every command it forks, from
// the controlling terminal of the session it shares with the server (the
// user's terminal, for a server started from a shell or by an editor in
// one): /dev/tty then opens for none of them. The init is not the
// session's leader, so TIOCNOTTY clears its own tie to the terminal and
// nothing else (no signal to the terminal's processes). The kernel's
// word, tty_nr in its stat (pid 1 of the /proc just mounted), says
// whether it is gone.
func leaveTerminal() error {
	self, err := proc.Stat(1)
	if err != nil || self.TTY == 0 {
		return err
	}
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.IoctlSetInt(fd, unix.TIOCNOTTY, 0)
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("init: leave the controlling terminal: %w", err)
	}
	if self, err = proc.Stat(1); err == nil && self.TTY != 0 {
		err = fmt.Errorf("init: the controlling terminal (device %#x) is still the init's", self.TTY)
	}
	return err
}

// closeOnExecFrom marks every descriptor from first on close-on-exec.
func closeOnExecFrom(first int) error {
	const closeRangeCloexec = 1 << 2 // CLOSE_RANGE_CLOEXEC, Linux 5.11
	if err := unix.CloseRange(uint(first), ^uint(0), closeRangeCloexec); err == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("init: list descriptors: %w", err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	return nil
}

// initState is the init's bookkeeping.
type initState struct {
	c *conn

	// mu guards cmds and owners. A spawn holds it from before the fork
	// until the command is recorded and its reply sent, and every scan
	// holds it: so no scan reaps a command that exited before it was
	// recorded, and its exit event never overtakes its spawn reply.
	mu     sync.Mutex
	cmds   map[int]*command       // by pid: commands not yet forgotten
	owners map[procKey][]*command // every process seen, and whom it is charged to
	// signals gives setUp the channel of SIGCHLD once catchSignals is
	// done.
	signals chan chan os.Signal

	// fresh: a look begun then has been accounted and its zombies
	// reaped: a SIGCHLD that came before needs no look of its own.
	fresh time.Time

	// home are the session's tasks files in the cgroup v1 hierarchies of
	// the limits, where the spawner thread returns after each fork.
	home []int

	// gcTarget sets the running collection target, once (Main); spawns
	// counts the commands spawned, for the second to set it.
	gcTarget func()
	spawns   int

	// net is the network to set up (nil: none); netReady and netFiles
	// what the ready message tells the server of it (network_linux.go).
	net      *Network
	netReady *message
	netFiles []*os.File

	// ep is the serving thread's epoll (-1: none): the socket and the
	// pidfds of held commands, by descriptor in pidfds.
	ep     int
	pidfds map[int32]*command
}

// command is the init's record of one spawned command.
type command struct {
	pid      int    // also its process group and session id
	start    uint64 // start time in clock ticks: pid and start name it for good
	exited   bool   // its exit was reported; its zombie is kept until released
	released bool   // the server is done with it: reap it, report nothing more
	lastLive uint64 // the last tick at which something charged to it was seen alive
	// groupSeen: the last scan saw a live process whose process group or
	// session is the command's (its id, which the kernel does not give
	// to another process while the group or session has a member).
	groupSeen bool

	denied     map[string]bool // what the sandbox denied it, as sent (supervisor_linux.go)
	deniedMore int             // denials past maxRecorded
}

// setUp makes the mounts private to the namespace, mounts its own /proc,
// gives the session what it must not share with the host (its own spill
// directory alone, devpts, /dev/shm, session keyring, read-only cgroups:
// see isolate.go), enforces the sandbox plan of m (nil: none) on the init
// itself, so that every command it forks inherits it, prepares the
// spawner thread and starts listening for signals. It returns what of the
// plan the host could not enforce.
func (s *initState) setUp(m *message) (unenforced []string, cacheLayer string, err error) {
	plan := m.Plan
	if os.Getpid() != 1 {
		return nil, "", fmt.Errorf("init: pid %d, not 1: not in a new PID namespace", os.Getpid())
	}
	// Nothing mounted here may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, "", fmt.Errorf("init: make / private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, "", fmt.Errorf("init: mount /proc: %w", err)
	}
	if err := leaveTerminal(); err != nil {
		return nil, "", err
	}
	if m.Dir != "" {
		root := m.SpillRoot
		if root == "" {
			root = filepath.Dir(m.Dir)
		}
		if err := sandbox.HideExcept(root, m.Dir); err != nil {
			return nil, "", fmt.Errorf("init: hide the other spill directories: %w", err)
		}
	}
	if err := isolate(m.ShmBytes); err != nil {
		return nil, "", err
	}
	if err := s.setUpNetwork(); err != nil {
		return nil, "", err
	}
	sandboxed := plan != nil && plan.Mode != sandbox.FullAccess
	if sandboxed && len(plan.Caches) > 0 {
		// Before Mount, which hides the layer's directory.
		if cacheLayer, err = sandbox.MountCaches(plan, m.CacheSession); err != nil {
			return nil, "", fmt.Errorf("init: %w", err)
		}
	}
	if sandboxed {
		// Mounts first: Landlock forbids mounting.
		if err := sandbox.Mount(plan); err != nil {
			return nil, "", fmt.Errorf("init: %w", err)
		}
	}
	// Commands run as the same user: without this they could read the
	// init's memory and use its socket to the server.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, "", fmt.Errorf("init: make non-dumpable: %w", err)
	}
	// In every mode, full-access included: no setuid or setgid file.
	// Loaded first, so that the sandbox's own filter has the last word
	// where both answer (io_uring_setup: EACCES in the sandbox).
	if err := sandbox.RestrictSetuid(); err != nil {
		return nil, "", fmt.Errorf("init: %w", err)
	}
	if sandboxed {
		// Landlock and the supervisor's filter bind this thread, which
		// forks the commands; the supervisor runs on the others.
		if unenforced, err = sandbox.Restrict(plan); err != nil {
			return nil, "", fmt.Errorf("init: %w", err)
		}
	}
	if err := s.supervise(plan); err != nil {
		return nil, "", err
	}
	if err := dropCapabilities(sandboxed); err != nil {
		return nil, "", err
	}
	chld := <-s.signals
	if !noReaper {
		go s.reaper(chld)
	}
	return unenforced, cacheLayer, nil
}

// catchSignals makes the init survive every signal a command can send
// it: as pid 1 it must not die of a `kill -TERM 1`
// (TestInitSurvivesEverySignal). The kernel delivers a signal to a
// namespace's init from inside only where the init handles it, and the
// Go runtime handles nearly all of them from its start: it ignores most
// it is not asked for, but dies of those in fatalSignals, so those are
// asked for (signal.Notify) and dropped. The terminal's stop signals,
// which the runtime leaves at their default (a stop, for a signal from
// outside the namespace), are caught too. Caught, not ignored: an
// ignored signal would stay ignored in the commands. It sends SIGCHLD's
// channel on done: a channel of its own, since os/signal drops a signal
// whose channel is full.
//
// Not every signal (signal.Notify with none named, as before): the
// runtime enables each signal of the kind it may be asked for with a
// round trip to a thread of its own, a hand-off of the one P each way,
// and the 55 of them cost the init's start about 110 thread wake-ups,
// 2 ms of CPU here; this list makes 11. And with every signal asked
// for, the runtime's own preemption signals (SIGURG) and each SIGCHLD
// also woke the goroutine that drops them.
//
// It runs beside the init's wait for its policy and its set-up.
func catchSignals(done chan<- chan os.Signal) {
	dropped := make(chan os.Signal, 16)
	signal.Notify(dropped, fatalSignals...)
	go func() {
		for range dropped {
		}
	}()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	done <- chld
}

// fatalSignals are the signals the Go runtime's handler ends the process
// for unless they are asked for (runtime/sigtab_linux_generic.go: those
// it kills, throws or panics for), SIGPIPE (its writes to a closed
// stderr would raise it) and the terminal's stop signals, which it
// leaves at their default.
var fatalSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP,
	unix.SIGABRT, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGPIPE,
	unix.SIGTERM, unix.SIGSTKFLT, unix.SIGSYS,
	unix.SIGCONT, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU,
}

// dropCapabilities drops, on this thread only (capabilities belong to a
// thread), what commands forked from it must not inherit: the ambient
// capabilities a non-root init was started with (so a non-root command
// has none) and, from the bounding set, CAP_SYS_ADMIN (a command running
// as root could unmount the namespace's /proc and see the host's, or
// mount a writable cgroup file system), CAP_SYS_PTRACE (it could reach
// into the init) and CAP_SETFCAP (a root server's command could give a
// file capabilities that hold on the host, the setuid bit's twin). Under a sandbox, every
// capability leaves the bounding set: a command run as root inside has
// none after its exec (so no CAP_DAC_OVERRIDE past a read-only mount's
// owner checks, no CAP_NET_RAW).
func dropCapabilities(all bool) error {
	drop := []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SETFCAP}
	if all {
		drop = drop[:0]
		for cp := uintptr(0); cp <= unix.CAP_LAST_CAP; cp++ {
			drop = append(drop, cp)
		}
	}
	for _, cp := range drop {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, cp, 0, 0, 0)
		if err == unix.EINVAL && all {
			continue // a capability this kernel does not know
		}
		if err != nil {
			return fmt.Errorf("init: drop capability %d from the bounding set: %w", cp, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("init: clear ambient capabilities: %w", err)
	}
	return nil
}

// spawn forks and records one command and replies.
func (s *initState) spawn(m *message, fds []int) {
	defer func() { closeFDs(fds) }() // those not closed after the fork
	if s.spawns++; s.spawns == 2 && s.gcTarget != nil {
		s.gcTarget()
	}
	if spawnTail != nil {
		defer spawnTail()
	}
	reply := &message{ID: m.ID, Op: m.Op}
	want := 3 + len(s.home)
	if m.Cgroup {
		want++
	}
	if len(fds) != want {
		reply.Err = fmt.Sprintf("nsinit: spawn: %d descriptors, want %d", len(fds), want)
		s.c.send(reply)
		return
	}
	// A command leads a process group of its own in the init's session,
	// which has no controlling terminal. Not a session of its own: where
	// the kernel's autogroups are on, every new session is a new
	// scheduling group, and under load each command's first run waited
	// for that group's turn among the machine's others (1.6-2.5x a bare
	// spawn at load 7, against 1.2-1.4x in the init's session:
	// docs/containment.md#spawning-and-waiting). A terminal's program does
	// get a new session, whose controlling terminal the terminal becomes
	// (TIOCSCTTY on descriptor 0 in the child).
	sys := &syscall.SysProcAttr{Setsid: m.Terminal, Setpgid: !m.Terminal, Setctty: m.Terminal}
	tasks := fds[3:]
	if m.Cgroup {
		// Born in its cgroup (clone3's CLONE_INTO_CGROUP): nothing it
		// forks can run outside it, even for a moment.
		sys.UseCgroupFD, sys.CgroupFD = true, fds[3]
		tasks = fds[4:]
	}
	// Its cgroups v1: this thread goes in, forks there, and comes back
	// (a v1 tasks file moves the thread that writes "0" to it).
	defer moveThread(s.home)
	if err := moveThread(tasks); err != nil {
		reply.Err = fmt.Sprintf("nsinit: spawn: enter the command's cgroup: %v", err)
		s.c.send(reply)
		return
	}
	pidfd := -1
	sys.PidFD = &pidfd
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, err := syscall.ForkExec(m.Path, m.Args, &syscall.ProcAttr{
		Dir:   m.Dir,
		Env:   m.Env,
		Files: []uintptr{uintptr(fds[0]), uintptr(fds[1]), uintptr(fds[2])},
		Sys:   sys,
	})
	// ForkExec returns once the child has exec'd (or failed): our copies
	// of its descriptors go now, before mu does and the child's exit can
	// be reported. A copy kept past that report holds the command's
	// output open, and the server's drain, cut at its grace, takes the
	// pipe for one a process left running holds.
	closeFDs(fds)
	fds = nil
	if err != nil {
		reply.Err = (&os.PathError{Op: "fork/exec", Path: m.Path, Err: err}).Error()
		s.c.send(reply)
		return
	}
	// The reply goes first: the server waits for it, not for the
	// record. We hold mu, so the child's exit cannot be reported (nor
	// the child reaped) before the reply and the record: its stat is
	// there, a zombie's at worst.
	reply.Pid = pid
	s.c.send(reply)
	info, err := proc.Stat(pid)
	if err != nil {
		// Cannot be, for a child not reaped: recorded as started now,
		// so that its exit is still reported and its ledger kept.
		info.StartTime = nowTicks()
	}
	c := &command{pid: pid, start: info.StartTime, lastLive: info.StartTime}
	s.cmds[pid] = c
	s.owners[procKey{pid, info.StartTime}] = []*command{c}
	if pidfd >= 0 {
		if s.ep >= 0 && unix.EpollCtl(s.ep, unix.EPOLL_CTL_ADD, pidfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pidfd)}) == nil {
			s.pidfds[int32(pidfd)] = c
		} else {
			unix.Close(pidfd)
		}
	}
}

// await waits until the socket is readable, reporting meanwhile the
// exits of held commands whose pidfds are ready.
func (s *initState) await() {
	var ev [8]unix.EpollEvent
	for {
		n, err := unix.EpollWait(s.ep, ev[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		sock := false
		for _, e := range ev[:n] {
			if e.Fd == initFD {
				sock = true
				continue
			}
			s.pidfdReady(e.Fd)
		}
		if sock {
			return
		}
	}
}

// pidfdReady reports the exit of the held command whose pidfd fd is
// ready (unless the reaper did, or the server released it) and closes
// the pidfd.
func (s *initState) pidfdReady(fd int32) {
	c, ok := s.pidfds[fd]
	if !ok {
		// Not one of ours (cannot be: only pidfds and the socket are
		// in the epoll): out of it, and never closed.
		unix.EpollCtl(s.ep, unix.EPOLL_CTL_DEL, int(fd), nil)
		return
	}
	s.mu.Lock()
	if !c.exited && !c.released {
		s.reportExit(c)
	}
	s.mu.Unlock()
	// Its only descriptor: the close takes it out of the epoll too.
	delete(s.pidfds, fd)
	unix.Close(int(fd))
}

// noReaper, when set (by a test), leaves the reaper unstarted: exits are
// then reported by their pidfds alone.
var noReaper bool

// spawnTail, when set (by a test), runs at the end of every spawn, after
// its lock is released: the moment a loaded init thread waits for the CPU.
var spawnTail func()

// moveThread moves the calling thread into the cgroup v1 of each tasks
// file.
func moveThread(tasks []int) error {
	for _, fd := range tasks {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return err
		}
	}
	return nil
}

// serve answers the server's requests until it closes the socket.
func (s *initState) serve() {
	// Woken for each request and each exit, it runs at once beside
	// CPU-bound work, not after that work's slice; the commands it
	// forks get the default slice.
	proc.ShortSlice()
	s.ep, s.pidfds = -1, make(map[int32]*command)
	if ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC); err == nil {
		if unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, initFD, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: initFD}) == nil {
			s.ep = ep
		} else {
			unix.Close(ep)
		}
	}
	for {
		if len(s.c.buf) == 0 && s.ep >= 0 {
			s.await()
		}
		m, fds, err := s.c.recv()
		if err != nil {
			return
		}
		if m.Op == opSpawn {
			s.spawn(m, fds) // on this thread: see Main
			continue
		}
		closeFDs(fds)
		switch m.Op {
		case opTerminate, opLeftovers, opStop, opCount:
			go s.answer(m) // they wait: other requests go on meanwhile
		default:
			s.answer(m)
		}
	}
}

// answer runs one request other than a spawn and replies.
func (s *initState) answer(m *message) {
	reply := &message{ID: m.ID, Op: m.Op}
	s.mu.Lock()
	c := s.cmds[m.Pid]
	held := c != nil && !c.released
	if m.Op == opRelease && held {
		c.released = true
		if c.exited {
			reap(c.pid) // else the reaper does when it exits
		}
	}
	s.mu.Unlock()
	switch {
	case m.Op == opRelease:
		return // no reply
	case m.Op == opPTY:
		master, slave, err := openPTY()
		if err != nil {
			reply.Err = err.Error()
			s.c.send(reply)
			return
		}
		s.c.send(reply, master, slave)
		master.Close()
		slave.Close()
		return
	case m.Op == opLeftovers:
		if c != nil {
			if err := s.killLeftovers(c, 0); err != nil {
				reply.Err = err.Error()
			}
		}
	case m.Op == opCount:
		if c != nil {
			reply.Count = s.countLeftovers(c)
		}
	case m.Op == opStop:
		// Released: its group id may name another group by now, and
		// what it left is charged to it.
		empty := 0
		if held {
			if _, clean := s.terminate(c, m.Grace, false); clean {
				empty = 1
			}
		}
		if c != nil {
			if err := s.killLeftovers(c, empty); err != nil {
				reply.Err = err.Error()
			}
		}
	case !held:
		// Its zombie was reaped: its group id may name another group.
		reply.Err = fmt.Sprintf("nsinit: %s: no command %d", m.Op, m.Pid)
	case m.Op == opSignal:
		if err := unix.Kill(-c.pid, syscall.Signal(m.Sig)); err != nil && err != unix.ESRCH {
			reply.Err = fmt.Sprintf("nsinit: signal group %d: %v", c.pid, err)
		}
	case m.Op == opAlive:
		reply.Alive = proc.GroupAlive(c.pid)
	case m.Op == opTerminate:
		reply.Escalated, _ = s.terminate(c, m.Grace, true)
	default:
		reply.Err = fmt.Sprintf("nsinit: unknown operation %q", m.Op)
	}
	s.c.send(reply)
}

// reaperPause is how long the reaper waits after a SIGCHLD before it
// looks, for a kill's look to make its own needless (see reaper).
const reaperPause = 2 * time.Millisecond

// reaper reaps the namespace's zombies, reports the exits of commands and
// keeps the ledger of who started what, on every SIGCHLD.
func (s *initState) reaper(chld <-chan os.Signal) {
	for range chld {
		t := time.Now()
		s.mu.Lock()
		// Exits first: reporting one needs no scan, and the server waits
		// for it.
		for _, c := range s.cmds {
			if !c.exited && !c.released {
				s.reportExit(c)
			}
		}
		s.mu.Unlock()
		// In a burst of kills, each kill's looks account and reap as this
		// one would, and a SIGCHLD comes with every death: a look begun
		// after the signal makes this one needless. A short pause lets
		// one come (and more signals gather into this one); a burst of
		// kills made a fifth of its looks here.
		time.Sleep(reaperPause)
		s.mu.Lock()
		needless := !s.fresh.Before(t)
		s.mu.Unlock()
		if needless {
			continue
		}
		// The scan runs unlocked, so as not to hold up the next spawn.
		// It may then miss a command spawned meanwhile (the next scan
		// finds it) or show a zombie reaped meanwhile, whose pid a new
		// process may hold by now: waiting for an unheld pid of ours
		// WNOHANG is harmless whoever holds it, and held commands are
		// looked up under the lock.
		s.look(func([]proc.Info) {})
	}
}

// look scans the namespace's /proc and, with mu held, brings the ledger
// up to date with the scan (account), reaps the zombies that are not
// held (reapZombies) and calls then, unless the scan failed, whose error
// it returns. The scan runs unlocked: concurrent looks share one
// (proc.Scan), and a spawn is not held up by it.
func (s *initState) look(then func(infos []proc.Info)) error {
	t := time.Now()
	infos, err := proc.Scan()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account(infos)
	s.reapZombies(infos)
	if t.After(s.fresh) {
		s.fresh = t
	}
	then(infos)
	return nil
}

// reapZombies reaps every zombie child of the init but the commands the
// server still holds; a held command's exit is reported once, and its
// zombie kept, so its process group id stays its own until it is
// released. mu must be held.
func (s *initState) reapZombies(infos []proc.Info) {
	for _, p := range infos {
		if p.PPid != 1 || p.State != 'Z' {
			continue
		}
		if c := s.cmds[p.Pid]; c != nil && !c.released {
			if !c.exited {
				s.reportExit(c)
			}
			continue
		}
		reap(p.Pid)
	}
}

// reap reaps pid, a child of the init, if it is a zombie.
func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// reportExit sends c's exit event if c has exited, once. mu must be held.
func (s *initState) reportExit(c *command) {
	status, err := exitStatus(c.pid)
	if err != nil {
		return // still running
	}
	c.exited = true
	c.lastLive = max(c.lastLive, nowTicks())
	s.c.send(&message{Op: opExit, Pid: c.pid, Status: status})
}

// exitStatus returns the raw wait status of pid, an exited child, without
// reaping it.
func exitStatus(pid int) (int, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		break
	}
	if info.Signo == 0 {
		return 0, errNotExited // WNOHANG, and nothing to report
	}
	// siginfo's SIGCHLD fields (si_pid, si_uid, si_status) follow the
	// three ints of its head, aligned as a pointer.
	const union = (3*4 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
	raw := (*[unsafe.Sizeof(info)]byte)(unsafe.Pointer(&info))
	code := *(*int32)(unsafe.Pointer(&raw[union+8]))
	const cldExited, cldKilled, cldDumped = 1, 2, 3 // si_code of SIGCHLD
	switch info.Code {
	case cldExited:
		return int(code&0xff) << 8, nil
	case cldKilled:
		return int(code & 0x7f), nil
	case cldDumped:
		return int(code&0x7f) | 0x80, nil
	}
	return 0, errNotExited
}

var errNotExited = errors.New("nsinit: not exited")

// terminate stops c's process group as proc.TerminateContext does:
// SIGTERM, SIGKILL if a member is alive after grace, and then, with wait,
// a bounded wait until none is. It reports whether a member was alive at
// the SIGKILL, and whether its last look found nothing of c alive, in
// its group or out of it: killLeftovers, which follows without wait,
// counts that look as the first of its two empty ones.
//
// Its looks are the ledger's scans, one a look, shared with the other
// kills of a burst and with the reaper, and accounted (what the group
// forks while it dies is charged at once); proc.GroupAlive confirms a
// "gone" with a second scan, against a member forked during the first by
// one that then exited. Such a member is in the group, which the SIGKILL
// takes whatever the look said, and killLeftovers's next look finds it.
// c is held (mu not held).
func (s *initState) terminate(c *command, grace time.Duration, wait bool) (escalated, clean bool) {
	if err := unix.Kill(-c.pid, unix.SIGTERM); err != nil {
		return false, false // never ESRCH while c's zombie is kept
	}
	alive, clean := s.waitGroupGone(c, grace)
	unix.Kill(-c.pid, unix.SIGKILL)
	if alive && wait {
		s.waitGroupGone(c, proc.KillWait)
	}
	return alive, clean
}

// waitGroupGone looks at c's group until it has no live member (false)
// or d has passed (true: still alive), pausing between looks (pause).
// clean: the last look found nothing of c alive, its group or else.
func (s *initState) waitGroupGone(c *command, d time.Duration) (alive, clean bool) {
	deadline := time.Now().Add(d)
	delay := time.Millisecond // most cooperative groups are gone by then
	var members []proc.Info
	for {
		pause(members, &delay, deadline)
		members = members[:0]
		others := false
		err := s.look(func(infos []proc.Info) {
			for _, p := range infos {
				switch {
				case p.Pid == 1 || !p.Alive():
				case p.Pgid == c.pid:
					members = append(members, p)
				case chargedTo(s.owners[keyOf(p)], c):
					others = true
				}
			}
		})
		alive = err != nil || len(members) > 0 // /proc unreadable: not proved gone
		if !alive || !time.Now().Before(deadline) {
			return alive, !alive && !others
		}
	}
}

// goneWait bounds a pause's wait for the processes it was given: a look
// follows, for what they started meanwhile that is not among them.
const goneWait = 100 * time.Millisecond

// pause waits before a kill's next look: until ps, what the previous look
// found alive and the kill waits for, have exited (at most goneWait), so
// that a burst of kills on a loaded machine looks again once where it
// looked at every tick of its backoff while they died; and at least
// *delay, doubled each time up to 8 ms, so that what forks faster than it
// dies is not looked at in a busy loop. Never past deadline.
func pause(ps []proc.Info, delay *time.Duration, deadline time.Time) {
	t := time.Now()
	floor := t.Add(*delay)
	*delay = min(2**delay, 8*time.Millisecond)
	if len(ps) > 0 {
		if left := deadline.Sub(t); left > 0 {
			proc.WaitGone(ps, min(left, goneWait)) // without pidfds: the floor alone
		}
	}
	if floor.After(deadline) {
		floor = deadline
	}
	if wait := time.Until(floor); wait > 0 {
		time.Sleep(wait)
	}
}

// killLeftovers SIGKILLs everything charged to c, again and again, until
// two scans in a row find nothing of it alive (a process forked between
// a scan and the kills is found by the next one), or KillWait has passed.
// empty is how many such scans were just made (terminate's last look).
func (s *initState) killLeftovers(c *command, empty int) error {
	deadline := time.Now().Add(proc.KillWait)
	delay := time.Millisecond
	var killed []proc.Info
	for empty < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("nsinit: kill leftovers of %d: still alive after %v", c.pid, proc.KillWait)
		}
		killed = killed[:0]
		err := s.look(func(infos []proc.Info) {
			if !c.released {
				// Its group first, at once: a member forked since the
				// scan is in it.
				unix.Kill(-c.pid, unix.SIGKILL)
			}
			for _, p := range infos {
				// A held command's group is its own: a member charged to
				// another command (setpgid) is waited for too.
				if p.Pid == 1 || !p.Alive() || !chargedTo(s.owners[keyOf(p)], c) && (c.released || p.Pgid != c.pid) {
					continue
				}
				proc.Signal(p, unix.SIGKILL)
				// Its group too, in one go: a fork-and-exit loop has
				// forked and gone since the scan, but its children stay
				// in the group. A group made by one of c's processes
				// holds c's descendants, and whatever another command's
				// process moved into it (setpgid, within the init's
				// session: its own doing); not another command's own
				// group, to which c's may be charged by rule 4.
				if o := s.cmds[p.Pgid]; p.Pgid > 1 && (o == nil || o == c) {
					unix.Kill(-p.Pgid, unix.SIGKILL)
				}
				killed = append(killed, p)
			}
		})
		if err != nil {
			return fmt.Errorf("nsinit: kill leftovers of %d: %w", c.pid, err)
		}
		if len(killed) == 0 {
			empty++
			continue
		}
		empty = 0
		pause(killed, &delay, deadline)
	}
	return nil
}

func chargedTo(owners []*command, c *command) bool {
	for _, o := range owners {
		if o == c {
			return true
		}
	}
	return false
}
