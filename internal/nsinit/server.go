//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/cachelayer"
	"github.com/conch-dev/conch/internal/frame"
	"github.com/conch-dev/conch/internal/prestart"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/sandbox"
)

// Options say how to start the init: which program runs Main.
type Options struct {
	// Path is the executable to run; it must call Main when started with
	// Args and Env (conch: its own binary, with the hidden subcommand
	// HelperArg). Empty means the very file this process runs
	// (/proc/self/exe, resolved by the kernel in the forked child), never
	// a path: a command that renames another program over the binary's
	// path, or in a writable root, cannot make the next init run it
	// (docs/containment.md#the-init).
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is the init's own environment (commands get theirs with each
	// Spawn); nil means prestart.Env, its Go runtime's settings.
	Env []string
	// Stderr receives what the init writes on its standard error (a Go
	// runtime crash, say); nil discards it.
	Stderr io.Writer
	// Cgroup, when set, is a cgroup v2 directory this process may write
	// (Probe's Cgroup.Dir where Writable): each command then runs in a
	// cgroup of its own under a session cgroup made there, and
	// KillLeftovers and Close start with its cgroup.kill.
	Cgroup string
	// Sandbox, when set, is enforced by the init on itself before it
	// serves, so every command inherits it: protected paths and hidden
	// paths mounted, Landlock, the unix-socket filter, no capabilities,
	// no_new_privs, and with the network off an empty network namespace.
	// Nil means no sandbox (containment only).
	Sandbox *sandbox.Plan
	// MaxPids and MaxMemory, when positive, bound each command and all
	// it starts: at most MaxPids tasks (threads count), at most MaxMemory
	// bytes of memory (past it the kernel's OOM killer ends a process of
	// the command). They need the pids and memory controllers, in the
	// cgroup v2 of Cgroup or else in cgroup v1 (docs/containment.md#limits):
	// where neither is writable, Start fails naming the cause.
	MaxPids, MaxMemory int64
	// SpillDir, when set, is the session's own spill directory, an
	// existing subdirectory of a directory whose other subdirectories
	// (other sessions' spill directories) the commands must not see: the
	// init covers that parent with an empty read-only tmpfs and binds
	// SpillDir alone back in its place (docs/containment.md#spill-files).
	SpillDir string
	// SpillRoot, when set, is the directory under which every spill
	// directory of the user lives, those of other servers too
	// (capture.UserRoot): the init covers it, not just SpillDir's parent,
	// and binds SpillDir alone back. Empty means SpillDir's parent.
	SpillRoot string

	// Spare, when set, is a process StartSpare started for options like
	// these (the same Path, Args, Env, Stderr and network namespace):
	// Start sends it the session's policy instead of starting one,
	// unless it has died meanwhile. Start owns it either way.
	Spare *Spare

	// Serving says the session's process goes on serving after the
	// session ends (conch serve, conch acp): its end then readies the
	// session's cache layer directories for the next session
	// (cachelayer.Session.ReadyAtClose), whose start is on a command's
	// path; conch run's next start readies them instead, beside its
	// init's own start.
	Serving bool

	name string // argv[0] of the init, when not Path
	// Network, when set, gives the init a network namespace of its own
	// set up for a filtered network policy (network_linux.go); the
	// server takes what it made with TakeNetwork.
	Network *Network
}

// HelperArg is the hidden subcommand on which conch's binary runs Main.
const HelperArg = prestart.HelperArg

// ErrClosed is returned by the methods of an Init that was closed, and of
// its Children.
var ErrClosed = errors.New("nsinit: closed")

// ErrInitExited is returned when the init died (killed from outside, or
// crashed): everything it ran died with it.
var ErrInitExited = errors.New("nsinit: the init exited")

// Init is a running init: pid 1 of a new user, PID and mount namespace,
// spawning the commands of one session. Its methods are safe for
// concurrent use.
type Init struct {
	proc     *os.Process
	c        *conn
	readDone chan struct{} // closed when the reader has ended

	calls frame.Calls[*message] // the requests awaiting the init's reply

	mu       sync.Mutex
	children map[int]*Child
	err      error // why calls fail: set when the reader ends, or by Close

	closeOnce sync.Once
	closeErr  error
	exited    chan struct{} // closed once the init process was reaped

	cg *cgroups   // nil without Options.Cgroup
	v1 []*cgroups // the cgroup v1 hierarchies of the limits not in cg

	unenforced []string // what the host could not enforce of Options.Sandbox

	cache      *cachelayer.Session // nil without Sandbox.Caches
	cacheLayer string              // how the init mounted them

	net NetFiles // what the init made for Options.Network, until taken

	// null is /dev/null, for the standard descriptors a command does not
	// get, opened by the first spawn that needs one and kept until Close
	// (not opened and closed again for each command). nullMu: a spawn
	// holds it read while it may send null, Close write to close it.
	nullMu sync.RWMutex
	null   *os.File
}

// devNull returns i's /dev/null (Init.null); nullMu must be held read.
func (i *Init) devNull() (*os.File, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.null == nil {
		f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		i.null = f
	}
	return i.null, nil
}

// CacheLayer says how the init gave its commands the cache layer of
// Options.Sandbox (docs/sandbox.md#the-cache-layer): "overlay"
// (copy-on-write over the user's caches), "copy (overlayfs: <why>)"
// (conch's copy alone, where overlayfs cannot be mounted), "none
// (<why>)" (the layer could not be made: the caches stay read-only), or
// "" (no cache layer).
func (i *Init) CacheLayer() string { return i.cacheLayer }

// Unenforced lists what of Options.Sandbox this host could not enforce,
// each with its cause ("unix sockets (seccomp unavailable)"), for the
// start-up log and `conch doctor`; nil when everything holds.
func (i *Init) Unenforced() []string { return i.unenforced }

// Start starts an init. The init dies with this process (parent-death
// signal SIGKILL, sent when the thread that called Start exits: do not
// call it from a goroutine locked to its thread that may exit), and when
// it dies the kernel kills everything in its namespace.
//
// The caller must be able to reap the init as a child started in its own
// session (this process uses proc.StartCmd). When this host does not
// allow the namespaces, the error is an *UnavailableError naming the
// cause.
func Start(opts *Options) (*Init, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.defaultPath()
	var cg *cgroups
	if o.Cgroup != "" {
		var err error
		if cg, err = newCgroups(o.Cgroup); err != nil {
			if o.Spare != nil {
				o.Spare.Close()
			}
			return nil, err
		}
	}
	v1, err := newLimits(o, cg)
	var (
		cache   *cachelayer.Session
		noCache string
	)
	if err == nil && o.Sandbox != nil && len(o.Sandbox.Caches) > 0 {
		// Without its layer the session's commands may not write the
		// user's caches: they stay read-only, and the rest holds.
		var cerr error
		if cache, cerr = cachelayer.Begin(o.Sandbox.CacheLayer); cerr != nil {
			o.Sandbox = o.Sandbox.WithoutCaches()
			noCache = "none (" + cerr.Error() + ")"
		} else {
			cache.ReadyAtClose = o.Serving
		}
	}
	var i *Init
	switch {
	case err == nil:
		i, err = start(o, v1, cache)
	case o.Spare != nil:
		o.Spare.Close()
	}
	if err != nil {
		for _, g := range append(v1, cg) {
			if g != nil {
				g.close()
			}
		}
		if cache != nil {
			cache.Close()
		}
		return nil, err
	}
	i.cg, i.v1, i.cache = cg, v1, cache
	if noCache != "" {
		i.cacheLayer = noCache
	}
	return i, nil
}

// Spare is an init's process started ahead of its session
// (StartSpare): cloned into its namespaces, executed, its runtime
// started, waiting for the policy Start sends it. Those steps are most
// of an init's start (docs/containment.md#spare-inits).
type Spare struct {
	proc   *os.Process
	ours   *os.File
	netNS  bool
	exited chan struct{} // closed once the process was reaped
}

// StartSpare starts the process of an init for options like o, ahead of
// the session it will serve: pass it to Start in Options.Spare. Only
// o's Path, Args, Env, Stderr and whether it gets a network namespace of
// its own (Network, or a sandbox with the network off) count; the rest
// travels with Start's policy. Close ends a spare no Start took.
func StartSpare(opts *Options) (*Spare, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.defaultPath()
	return startProcess(o)
}

// Close kills a spare no Start took and waits until it is gone.
func (s *Spare) Close() {
	s.ours.Close()
	s.proc.Kill()
	<-s.exited
}

// fits reports whether the spare can serve as o's init: alive, and
// cloned with the network namespace o needs.
func (s *Spare) fits(o Options) bool {
	select {
	case <-s.exited:
		return false
	default:
	}
	return s.netNS == newNetNS(o)
}

// defaultPath makes an empty Path this very binary (selfExe).
func (o *Options) defaultPath() {
	if o.Path == "" {
		o.Path = selfExe
		// The name it goes by (argv[0], and the init sets its comm
		// from it): the binary's, not "exe".
		if exe, err := os.Executable(); err == nil {
			o.name = exe
		}
	}
}

// startProcess clones and executes an init's process for o, which waits
// for its policy on the other end of Spare.ours.
func startProcess(o Options) (*Spare, error) {
	ours, theirs, err := socketPair()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Path, o.Args...)
	if o.name != "" {
		cmd.Args[0] = o.name
	}
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = prestart.Env
	}
	cmd.Stderr = o.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = prestart.Attr()
	netNS := newNetNS(o)
	if netNS {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	}
	err = proc.StartCmd(cmd) // dumpable for the start when not root: see there
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, unavailable(fmt.Errorf("nsinit: start the init %s: %w", o.Path, err))
	}
	exited := make(chan struct{})
	go func() {
		proc.WaitCmd(cmd)
		close(exited)
	}()
	s := &Spare{proc: cmd.Process, ours: ours, netNS: netNS, exited: exited}
	return s, nil
}

// start starts the init, or finishes o.Spare's start; v1 are the cgroup
// v1 hierarchies of the limits, whose session tasks files it is given.
func start(o Options, v1 []*cgroups, cache *cachelayer.Session) (*Init, error) {
	if o.Spare == nil {
		o.Spare = prestarted(o)
	}
	if p := o.Spare; p != nil {
		if p.fits(o) {
			i, err := finish(o, p, v1, cache)
			if !errors.Is(err, errSpareGone) {
				return i, err
			}
			// It died before it took its policy: fits saw it alive an
			// instant before, or its reaper had not said so yet.
		} else {
			p.Close()
		}
	}
	p, err := startProcess(o)
	if err != nil {
		return nil, err
	}
	return finish(o, p, v1, cache)
}

// prestarted is the init's process package prestart started as this
// process began (conch run's), as a spare, if o starts its init as conch
// does its own: nil otherwise, or when there is none.
func prestarted(o Options) *Spare {
	if o.Path != selfExe || !slices.Equal(o.Args, []string{HelperArg}) || len(o.Env) > 0 || o.Stderr != io.Writer(os.Stderr) {
		return nil
	}
	ap := prestart.Take(proc.Claim)
	if ap == nil {
		return nil
	}
	exited := make(chan struct{})
	go func() {
		ap.Proc.Wait()
		proc.Release(ap.Proc.Pid)
		close(exited)
	}()
	return &Spare{proc: ap.Proc, ours: ap.Conn, netNS: ap.NetNS, exited: exited}
}

// errSpareGone is finish's error for a spare that could not take its
// policy: its process is gone, and Start starts a fresh one.
var errSpareGone = errors.New("nsinit: the spare init is gone")

// finish sends the init p its policy and waits until it is ready.
func finish(o Options, p *Spare, v1 []*cgroups, cache *cachelayer.Session) (*Init, error) {
	c, err := newConn(p.ours)
	if err != nil {
		p.Close()
		return nil, err
	}
	i := &Init{
		proc:     p.proc,
		c:        c,
		readDone: make(chan struct{}),
		children: make(map[int]*Child),
		exited:   p.exited,
	}
	// The sandbox travels as the first message, not in argv or the
	// environment, which commands could read in /proc.
	var homes []*os.File
	for _, g := range v1 {
		homes = append(homes, g.home)
	}
	// An init that never says it is ready (a mount stuck on a dead
	// network file system, say) is killed: the session's first command
	// and its end wait on this start.
	// The timer's kill and the answer are settled once, whichever comes
	// first: an answer read an instant before the timer killed the init
	// was taken for a ready init, and the session's first spawn then
	// failed with ErrInitExited (a start past the timeout on a loaded
	// machine, BenchmarkTaskKillBurst beside ten burners).
	var settled atomic.Bool
	stuck := time.AfterFunc(startTimeout, func() {
		if settled.CompareAndSwap(false, true) {
			p.proc.Kill()
		}
	})
	pol := o.policy()
	if cache != nil {
		pol.CacheSession = cache.Dir
	}
	err = c.send(pol, homes...)
	if err == nil && cache != nil {
		// While the init sets up.
		cache.ClearLater()
	}
	if err != nil && o.Spare == p {
		stuck.Stop()
		c.close()
		p.Close()
		return nil, fmt.Errorf("%w: %w", errSpareGone, err)
	}
	var (
		m   *message
		fds []int
	)
	if err == nil {
		m, fds, err = c.recv()
	}
	if startAnswered != nil {
		startAnswered()
	}
	stuck.Stop()
	if !settled.CompareAndSwap(false, true) {
		if err == nil {
			err = errors.New("it answered after its kill")
		}
		err = fmt.Errorf("no answer within %v: %w", startTimeout, err)
	}
	if err == nil {
		switch m.Op {
		case opReady:
			i.unenforced, i.cacheLayer = m.Unenforced, m.CacheLayer
			i.keepNetwork(m, fds)
		case opFail:
			err = errors.New(m.Err)
		default:
			err = fmt.Errorf("unexpected %q from the init", m.Op)
		}
	}
	if err != nil {
		closeFDs(fds)
		i.closeNetwork()
		c.close()
		p.proc.Kill() // an init that failed exits by itself; one that answered wrong may not
		<-i.exited
		return nil, unavailable(fmt.Errorf("nsinit: start: %w", err))
	}
	go i.read()
	return i, nil
}

// selfExe names the file this process runs (prestart.SelfExe).
const selfExe = prestart.SelfExe

// startTimeout bounds the wait for a new init's first answer.
var startTimeout = 10 * time.Second

// startAnswered, when set (tests), runs between a start's answer and
// its check against the timeout.
var startAnswered func()

// Pid returns the init's pid (outside its namespace).
func (i *Init) Pid() int { return i.proc.Pid }

// read dispatches the init's replies and events until the socket ends.
func (i *Init) read() {
	defer close(i.readDone)
	for {
		m, fds, err := i.c.recv()
		if err != nil {
			break
		}
		if m.Op == opPTY && m.Err == "" {
			m.fds = fds // the caller's
		} else {
			closeFDs(fds)
		}
		if m.Op == opDenied {
			i.mu.Lock()
			ch := i.children[m.Pid]
			i.mu.Unlock()
			if ch != nil {
				ch.deny(m.Denial, m.More)
			}
			continue
		}
		if m.Op == opExit {
			i.mu.Lock()
			ch := i.children[m.Pid]
			i.mu.Unlock()
			if ch != nil {
				ch.settle(syscall.WaitStatus(m.Status), nil)
			}
			continue
		}
		if m.Op == opSpawn && m.Err == "" {
			// The Child exists before the command's exit event, which
			// may follow at once, is read.
			i.child(m.Pid)
		}
		if !i.calls.Answer(m.ID, m) {
			closeFDs(m.fds)
		}
	}
	i.mu.Lock()
	if i.err == nil {
		i.err = ErrInitExited
	}
	children, err := i.children, i.err
	i.children = nil
	i.mu.Unlock()
	i.calls.Fail(err)
	for _, ch := range children {
		ch.settle(0, err)
	}
}

// call sends a request and waits for its reply.
func (i *Init) call(m *message, files ...*os.File) (*message, error) {
	id, w, err := i.calls.Begin()
	if err != nil {
		return nil, err
	}
	m.ID = id
	if err := i.c.send(m, files...); err != nil {
		i.calls.Forget(id)
		i.mu.Lock()
		ierr := i.err
		i.mu.Unlock()
		if ierr != nil {
			return nil, ierr
		}
		return nil, err
	}
	r, ok := <-w
	if !ok {
		return nil, i.calls.Err()
	}
	if r.Err != "" {
		return r, errors.New(r.Err)
	}
	return r, nil
}

// OpenPTY opens a new pseudo-terminal in the session's own devpts
// instance and returns its master and slave sides: a terminal a command
// of the session can name (`tty` prints /dev/pts/N of the session) and
// that no other session, nor the host, can open.
func (i *Init) OpenPTY() (master, slave *os.File, err error) {
	r, err := i.call(&message{Op: opPTY})
	if err != nil {
		if r != nil {
			closeFDs(r.fds)
		}
		return nil, nil, fmt.Errorf("nsinit: open a terminal: %w", err)
	}
	if len(r.fds) != 2 {
		closeFDs(r.fds)
		return nil, nil, fmt.Errorf("nsinit: open a terminal: %d descriptors, want 2", len(r.fds))
	}
	return os.NewFile(uintptr(r.fds[0]), "/dev/ptmx"), os.NewFile(uintptr(r.fds[1]), "/dev/pts"), nil
}

// Command is what Spawn runs: Dir is a path as the namespace sees it
// (the same as outside); the standard descriptors are passed to the init
// and may be closed once Spawn returns.
type Command = proc.Command

// Spawn starts c in a process group of its own inside the namespace, in
// the init's session, which has no controlling terminal (c.Terminal: in
// a new session, whose controlling terminal c's stdin becomes). The
// returned Child must be released (Child.Release) once the caller is
// done with it.
func (i *Init) Spawn(c Command) (*Child, error) {
	i.nullMu.RLock()
	defer i.nullMu.RUnlock()
	files := []*os.File{c.Stdin, c.Stdout, c.Stderr}
	for k, f := range files {
		if f != nil {
			continue
		}
		null, err := i.devNull()
		if err != nil {
			return nil, fmt.Errorf("nsinit: spawn: %w", err)
		}
		files[k] = null
	}
	// The command's cgroups: v2 (born in it), then one per cgroup v1
	// hierarchy of a limit (the init moves its thread in to fork).
	var (
		groups []*cgroups
		dirs   []string
	)
	if i.cg != nil {
		groups = append(groups, i.cg)
	}
	groups = append(groups, i.v1...)
	removeAll := func() {
		for k, d := range dirs {
			groups[k].remove(d)
		}
	}
	for _, g := range groups {
		dir, f, err := g.add()
		if err != nil {
			removeAll()
			return nil, err
		}
		defer f.Close()
		dirs = append(dirs, dir)
		files = append(files, f)
	}
	r, err := i.call(&message{Op: opSpawn, Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir, Terminal: c.Terminal, Cgroup: i.cg != nil}, files...)
	if err != nil {
		removeAll()
		return nil, fmt.Errorf("nsinit: spawn %s: %w", c.Path, err)
	}
	for _, g := range groups {
		g.refill() // the next command's, while this one runs
	}
	ch := i.child(r.Pid)
	if i.cg != nil {
		ch.cgroup, dirs = dirs[0], dirs[1:]
	}
	ch.v1 = dirs
	return ch, nil
}

// child returns the Child of pid, which the reader recorded when the
// spawn's reply came.
func (i *Init) child(pid int) *Child {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.childLocked(pid)
}

// childLocked returns the Child of pid, recording it if it is new; i.mu
// must be held.
func (i *Init) childLocked(pid int) *Child {
	if ch := i.children[pid]; ch != nil {
		return ch
	}
	ch := &Child{i: i, Pid: pid, exited: make(chan struct{})}
	if i.children == nil {
		ch.settle(0, i.err)
		return ch
	}
	i.children[pid] = ch
	return ch
}

// Close ends the init: it stops serving, and the kernel kills everything
// in its namespace. Close returns once the init and all of it are gone.
func (i *Init) Close() error {
	i.closeOnce.Do(func() {
		i.mu.Lock()
		if i.err == nil {
			i.err = ErrClosed
		}
		i.mu.Unlock()
		i.c.close()
		<-i.exited
		<-i.readDone
		i.nullMu.Lock()
		if i.null != nil {
			i.null.Close()
		}
		i.nullMu.Unlock()
		i.closeNetwork()
		var errs []error
		for _, g := range append(i.v1, i.cg) {
			if g != nil {
				errs = append(errs, g.close())
			}
		}
		// The init's mounts went with its namespace: what the session
		// wrote to its cache layer joins the layer all sessions share.
		if i.cache != nil {
			errs = append(errs, i.cache.Close())
		}
		i.closeErr = errors.Join(errs...)
	})
	return i.closeErr
}

// Child is a command spawned by an Init. Its pid is also its process group
// and session id, inside the namespace.
type Child struct {
	i      *Init
	Pid    int      // inside the namespace
	cgroup string   // its cgroup; "" without Options.Cgroup
	v1     []string // its cgroups in Init.v1's hierarchies, in their order

	once   sync.Once
	exited chan struct{}
	status syscall.WaitStatus
	err    error

	dmu        sync.Mutex
	denials    []sandbox.Denial // what the sandbox denied the command, in order
	deniedMore int              // and how many more it could not keep

	// allKilled: a KillLeftovers emptied the command's cgroup and found
	// nothing else of it alive, so nothing of it is left to start more:
	// Leftovers is 0 without asking the init. Only with a cgroup: its
	// kill takes a fork loop whatever its speed, while a scan may list
	// each of its processes only after it forked its next and exited
	// (the init's count then still finds the loop's zombies).
	allKilled atomic.Bool
}

// deny adds to what the sandbox denied the command.
func (c *Child) deny(d *sandbox.Denial, more int) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if d != nil {
		c.denials = append(c.denials, *d)
	}
	c.deniedMore += more
}

// Denials returns what the sandbox denied the command and the processes
// it started so far, in the order denied, each operation once
// (docs/sandbox.md#the-denial-record), and how many more denials there
// were that the record could not keep. Every denial of an operation
// made before the command's shell exited has arrived by the time Wait
// returns; denials that arrive after Release are not kept.
func (c *Child) Denials() ([]sandbox.Denial, int) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return append([]sandbox.Denial(nil), c.denials...), c.deniedMore
}

func (c *Child) settle(ws syscall.WaitStatus, err error) {
	c.once.Do(func() {
		c.status, c.err = ws, err
		close(c.exited)
	})
}

// Exited is closed when the command's shell has exited (or the init is
// gone); Wait then returns at once.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// Wait waits for the command to exit and returns its raw wait status: an
// exit code or the signal that killed it, as the kernel reported it. The
// command's zombie is kept until Release, so its process group id stays
// its own and Signal, Alive and Terminate stay safe after the exit. The
// error is ErrClosed or ErrInitExited when the init went first.
func (c *Child) Wait() (syscall.WaitStatus, error) {
	<-c.exited
	return c.status, c.err
}

// Signal sends sig to the command's process group.
func (c *Child) Signal(sig syscall.Signal) error {
	_, err := c.i.call(&message{Op: opSignal, Pid: c.Pid, Sig: int(sig)})
	return err
}

// Alive reports whether any member of the command's process group is
// alive (zombies count as gone).
func (c *Child) Alive() (bool, error) {
	r, err := c.i.call(&message{Op: opAlive, Pid: c.Pid})
	if err != nil {
		return false, err
	}
	return r.Alive, nil
}

// Terminate stops the command's process group as proc.Terminate does:
// SIGTERM, then SIGKILL if anything of it is alive after grace, and a
// bounded wait until it is gone. It reports whether SIGKILL was sent.
func (c *Child) Terminate(grace time.Duration) (escalated bool, err error) {
	r, err := c.i.call(&message{Op: opTerminate, Pid: c.Pid, Grace: grace})
	if err != nil {
		return false, err
	}
	return r.Escalated, nil
}

// KillLeftovers SIGKILLs everything the command started that is still
// alive, the members of its group, the descendants that left it (setsid,
// double fork) and the orphans charged to it, and returns once they are
// gone. It may be called before or after Release.
func (c *Child) KillLeftovers() error {
	if c.allKilled.Load() {
		c.removeCgroups() // if the first one found them still populated
		return nil
	}
	if c.cgroup != "" {
		if err := kill(c.cgroup); err != nil {
			return err
		}
	}
	_, err := c.i.call(&message{Op: opLeftovers, Pid: c.Pid})
	if c.cgroup != "" {
		// What the cgroup's kill signalled is gone too before this
		// returns: a process of another command's group in it (setpgid)
		// is no leftover the init waits for (TestJoinedGroup saw one
		// still alive after the kill, beside CPU burners).
		err = errors.Join(err, waitEmpty(c.cgroup, proc.KillWait))
	}
	c.removeCgroups()
	if err == nil && c.cgroup != "" {
		c.allKilled.Store(true)
	}
	return err
}

// Stop is Terminate, then KillLeftovers, in one request to the init (the
// executor's kill, shell/local's Stopper): its looks at the group are the
// init's scans, which then look for the leftovers. With a cgroup it is
// the two requests: the cgroup's kill must come between them (after the
// group's grace, before the ledger's sweep), where it takes a fork loop
// in one step that the sweep could chase until proc.KillWait. Like
// KillLeftovers, it may be called after Release, and then only takes
// the leftovers.
func (c *Child) Stop(grace time.Duration) error {
	if c.cgroup != "" || c.allKilled.Load() {
		c.Terminate(grace) // fails after Release: the leftovers remain
		return c.KillLeftovers()
	}
	_, err := c.i.call(&message{Op: opStop, Pid: c.Pid, Grace: grace})
	return err
}

// Leftovers counts the live processes the command started, its shell
// aside: the members of its group and those charged to it that left it.
// A process that forks and exits in a loop counts as one, although no
// scan may see it alive. It may be called before or after Release.
func (c *Child) Leftovers() (int, error) {
	if c.allKilled.Load() {
		return 0, nil
	}
	r, err := c.i.call(&message{Op: opCount, Pid: c.Pid})
	if err != nil {
		return 0, err
	}
	return r.Count, nil
}

// removeCgroups removes the command's cgroups that are empty.
func (c *Child) removeCgroups() {
	if c.cgroup != "" {
		c.i.cg.remove(c.cgroup)
	}
	for k, d := range c.v1 {
		c.i.v1[k].remove(d)
	}
}

// Release tells the init that the caller is done with the command: its
// zombie is reaped (its process group id may then be reused), and what
// it left running stays charged to it, for KillLeftovers or Close.
// Signal, Alive and Terminate fail after Release, and Wait returns
// ErrClosed if the command had not exited; call it only once none of
// them is in flight, as the local provider reaps a shell only after its
// kill has finished.
func (c *Child) Release() {
	c.i.mu.Lock()
	if c.i.children != nil {
		delete(c.i.children, c.Pid)
	}
	c.i.mu.Unlock()
	c.i.c.send(&message{Op: opRelease, Pid: c.Pid}) // no reply; a dead init needs none
	c.settle(0, ErrClosed)
	c.removeCgroups() // unless something it left runs on
}

// MaxShmBytes bounds a session's private /dev/shm: a command cannot keep
// more of the machine's memory there than this, or than the session's
// memory limit when that is lower (docs/containment.md#what-a-command-sees-and-holds).
const MaxShmBytes = 64 << 20

// policy is the init's first message: what it mounts and enforces before
// it serves.
func (o *Options) policy() *message {
	shm := int64(MaxShmBytes)
	if o.MaxMemory > 0 {
		shm = min(shm, o.MaxMemory)
	}
	return &message{Op: opPolicy, Plan: o.Sandbox, Dir: o.SpillDir, SpillRoot: o.SpillRoot, ShmBytes: shm, Net: o.Network}
}
