//go:build linux

// Package local is the provider of the shell seam that runs commands as
// local processes: one bash per command, each in its own session and
// process group, killed as a group, with bounded output and a scrubbed
// environment.
package local

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/capture"
	"github.com/conch-dev/conch/internal/envpolicy"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/shell"
)

// Executor runs commands as local processes. Create it with New; it is
// safe for concurrent use.
type Executor struct {
	opts     Options
	limits   shell.Limits
	baseEnv  []string
	scrubbed []string // names dropped from Options.Environ
	spill    *capture.Dir
	spawner  Spawner
	// tracker follows what runs as this process's descendants (the
	// default spawner's shells, terminals) and what they leave behind.
	tracker *proc.Tracker

	// startMu orders spawns against Close: a spawn holds it for reading
	// from its check of closed until its command is started and
	// registered, and Close takes it for writing to set closed. So Close
	// never sees a command that is half started, and none starts after.
	startMu sync.RWMutex
	closed  bool // guarded by startMu

	mu   sync.Mutex
	live map[*command]struct{}
	wg   sync.WaitGroup // one per live command, and one per prewarm in flight
	// warm is the shell started ahead for the next foreground command
	// (Options.Warm, warm.go); prewarming is closed when the start in
	// flight has ended. Both guarded by mu.
	warm       *command
	prewarming chan struct{}
	// busy counts the starts in flight and the terminals running: no
	// warm shell is started beside them.
	busy int
	// lastForeground is the shape of the last foreground command that
	// ended (its Command and Timeout aside), for the next guess.
	lastForeground *shell.Spec

	closeOnce sync.Once
	closeErr  error
}

var (
	_ shell.Executor   = (*Executor)(nil)
	_ shell.Graceful   = (*Executor)(nil)
	_ shell.OwnerEnder = (*Executor)(nil)
)

// New checks opts (nil means all defaults) and returns an Executor. It
// makes this process a child subreaper, so that nothing a command leaves
// behind escapes Close.
//
// New also makes this whole process non-dumpable (PR_SET_DUMPABLE 0), and
// it stays so: a command runs as the same user, and could otherwise read
// the process's environment (/proc/<pid>/environ) and memory
// (/proc/<pid>/mem), or write to its open files (/proc/<pid>/fd/N), such
// as the stdout that carries an MCP or ACP stream. This protects the
// secrets of the program that embeds the executor too; it also means
// that program leaves no core dump. A process with CAP_SYS_PTRACE (root)
// can still reach it.
func New(opts *Options) (*Executor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if err := proc.NonDumpable(); err != nil {
		return nil, fmt.Errorf("local: make the process non-dumpable: %w", err)
	}
	if err := proc.BecomeSubreaper(); err != nil {
		return nil, err
	}
	tracker := proc.NewTracker()
	spawner := o.Spawner
	if spawner == nil {
		spawner = &direct{tracker: tracker, wrap: o.Wrap}
	}
	base, scrubbed := envpolicy.Base(o.Environ, o.PassEnv)
	return &Executor{
		opts:     o,
		limits:   shell.Limits{Cwd: o.Cwd, Timeout: o.Timeout, MaxTimeout: o.MaxTimeout, MaxStdoutBytes: capture.MaxTail},
		baseEnv:  base,
		scrubbed: scrubbed,
		spill:    capture.NewDir(o.SpillParent, o.SpillBudget),
		spawner:  spawner,
		tracker:  tracker,
		live:     make(map[*command]struct{}),
	}, nil
}

// Options returns the effective settings.
func (e *Executor) Options() Options { return e.opts }

// Scrubbed returns the names of the variables of Options.Environ that
// commands do not inherit (credentials, conch's managed names, bash
// start-up hooks), sorted, for a start-up log. It never returns a value.
func (e *Executor) Scrubbed() []string { return slices.Clone(e.scrubbed) }

// Grace implements shell.Graceful.
func (e *Executor) Grace() time.Duration { return e.opts.Grace }

// Resolve implements shell.Executor with the executor's Limits.
func (e *Executor) Resolve(r shell.Request) (shell.Spec, error) { return e.limits.Resolve(r) }

// Launch implements shell.Executor.
func (e *Executor) Launch(s shell.Spec) (shell.Process, error) {
	c, err := e.spawn(s, true)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Start implements shell.Executor.
func (e *Executor) Start(s shell.Spec) (shell.Process, error) {
	c, err := e.spawn(s, false)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close implements shell.Executor. A Close that runs while another is in
// progress waits for it.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Executor) close() error {
	e.startMu.Lock()
	e.closed = true
	e.startMu.Unlock()
	e.mu.Lock()
	cmds := make([]*command, 0, len(e.live))
	for c := range e.live {
		cmds = append(cmds, c)
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Go(func() { c.stop(causeClose, false) })
	}
	wg.Wait()
	errSpawner := e.spawner.Close()
	e.tracker.KillAll(e.opts.Grace)
	e.wg.Wait()
	return errors.Join(errSpawner, e.spill.Close())
}

// EndOwner implements shell.OwnerEnder: it kills the commands still
// running for owner (they report Aborted, and StatusKilled) and everything
// the owner's commands left running, and returns once all is gone (at
// most about the grace plus proc.KillWait). With the default spawner,
// escapees (setsid) are taken when they could be attributed to one of the
// owner's commands: seen while their parent lived, or started while only
// this owner's commands ran; the others wait for Close.
func (e *Executor) EndOwner(owner string) {
	e.mu.Lock()
	var cmds []*command
	for c := range e.live {
		if c.owner == owner {
			cmds = append(cmds, c)
		}
	}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Go(func() { c.stop(causeKill, false) })
	}
	wg.Wait()
	if e.opts.Warm {
		// A command starts the next one's shell before it is done
		// (prewarm): once the owner's are done, none of them can start
		// another after endWarm.
		for _, c := range cmds {
			<-c.done
		}
		e.endWarm(owner)
	}
	// The owner's sweep comes after the stops, which take each running
	// command's group and leftovers: run alongside them it would signal
	// the same groups again (a TERM trap would run twice). The Spawner's
	// end comes last, as Spawner.EndOwner says: a contained one ends the
	// owner's whole boundary, and the commands stopped first report
	// their kill, not the boundary's end.
	e.tracker.KillOwner(owner, e.opts.Grace)
	e.spawner.EndOwner(owner)
}

// SpillDir creates, if needed, the directory where the spill files of
// owner's commands go (a subdirectory of the executor's spill directory
// per owner, under its one budget), and returns its path: a Spawner that
// gives each owner a boundary shows the owner this directory and none of
// the others (docs/containment.md#spill-files).
func (e *Executor) SpillDir(owner string) (string, error) {
	return e.spill.For(owner).Ensure()
}

// SpillRoot is the directory under which the owners' spill directories
// (SpillDir) lie and nothing of another owner's or another server's is
// to be shown: the user's spill root, shared by every conch server of the
// user, when Options.SpillParent is empty; else the executor's own spill
// directory. It is "" before the first SpillDir or spill.
func (e *Executor) SpillRoot() string { return e.spill.Root() }

// Kill causes; the first one recorded wins.
const (
	causeNone int32 = iota
	causeTimeout
	causeAbort // Run's ctx
	causeKill  // Process.Kill
	causeClose
)

// command is one spawned bash and the capture of its output. It is the
// shell.Process of Start and Launch.
type command struct {
	e     *Executor
	owner string
	// shape is the shell's shape (its Spec without command, timeout and
	// stdin: shapeOf) for a warm shell, and for a foreground command
	// without stdin, whose end starts the next warm shell like it
	// (warm.go); nil otherwise.
	shape          *shell.Spec
	child          Child
	timeout        time.Duration // 0 for Start; a warm shell's is set by activate, under mu
	timer          *time.Timer   // under mu
	warm           bool          // a warm shell not activated yet (under mu)
	stdout, stderr *capture.Stream

	// The parent's ends of the pipes; stdin is nil for /dev/null. The
	// child's ends go to the spawner in shell.
	stdoutR, stderrR, stdinW *os.File
	shell                    Command
	copying                  sync.WaitGroup // the goroutines that move the pipes
	drained                  chan struct{}  // closed when stdout and stderr reached EOF
	leftRunning              atomic.Bool    // the drain was cut with a pipe still held open

	// done is closed once the shell was collected, its pipes are drained
	// (or their drain was cut at the grace), and any kill has finished.
	done chan struct{}

	mu          sync.Mutex
	cause       int32         // the first kill cause; causeNone if none
	shellExited bool          // the shell has exited: its timeout no longer applies
	reaping     bool          // the shell is about to be reaped: no kill may start any more
	killDone    chan struct{} // closed when the kill that started has finished

	// Set before done is closed.
	exitCode *int
	signal   string
	notes    []string             // the Annotator's
	sandbox  *shell.SandboxReport // the Annotator's
}

var (
	_ shell.Process   = (*command)(nil)
	_ shell.Leftovers = (*command)(nil)
)

// spawn checks the workdir (it exists, is a directory, and we may enter
// it) and starts bash in a new session and group.
// timed arms s.Timeout.
func (e *Executor) spawn(s shell.Spec, timed bool) (*command, error) {
	if err := checkWorkdir(s.Workdir); err != nil {
		return nil, err
	}
	if e.opts.Warm {
		release := e.hold()
		defer release()
		if c := e.takeWarm(s, timed); c != nil {
			return c, nil
		}
	}
	return e.start(s, timed, false)
}

// start starts bash for s: `bash -c s.Command`, or with warm the shell
// that waits for its command on stdin (warm.go).
func (e *Executor) start(s shell.Spec, timed, warm bool) (*command, error) {
	maxOut := e.opts.MaxOutputBytes
	if s.StdoutMaxBytes > 0 {
		maxOut = s.StdoutMaxBytes
	}
	spill := e.spill.For(s.Owner)
	c := &command{
		e:      e,
		owner:  s.Owner,
		stdout: capture.NewStream(spill, "stdout", maxOut, e.opts.MaxSpillBytes),
		stderr: capture.NewStream(spill, "stderr", e.opts.MaxOutputBytes, e.opts.MaxSpillBytes),
		done:   make(chan struct{}),
		warm:   warm,
	}
	if timed {
		c.timeout = s.Timeout
	}
	if e.opts.Warm && (warm || timed && s.Stdin == nil) {
		c.shape = shapeOf(s)
	}
	// Args[0] stays "bash" whatever the binary's path. PWD names the workdir as given, symlinks included, the way os/exec
	// sets it for a command that inherits the environment; bash keeps it
	// when it names the directory it starts in, so `pwd` shows the path
	// the caller chose rather than the server's own PWD or the real path.
	c.shell = Command{
		Command: proc.Command{
			Path: e.opts.Shell,
			Args: []string{"bash", "-c", s.Command},
			Env:  envpolicy.Build(e.baseEnv, s.Workdir, s.Env, s.ManagedEnv),
			Dir:  s.Workdir,
		},
		Owner:     s.Owner,
		Workspace: s.Workspace,
		Narrowing: s.Narrowing,
		Grants:    s.Grants,
		Grace:     e.opts.Grace,
	}

	// Our own pipes rather than os/exec's: the shell stays unreleased (a
	// zombie holding its pgid, for the default spawner) until the drain
	// and any kill are over, so no kill signals a group whose id may have
	// been reused.
	if warm {
		c.shell.Args = []string{"bash", "-c", warmScript, "bash"}
	}
	if err := c.openPipes(s.Stdin != nil || warm); err != nil {
		c.stdout.Close()
		c.stderr.Close()
		return nil, &shell.SpawnError{Err: err}
	}

	e.startMu.RLock()
	defer e.startMu.RUnlock()
	if e.closed {
		c.closePipes(false)
		c.closePipes(true)
		c.stdout.Close()
		c.stderr.Close()
		return nil, shell.ErrClosed
	}
	if !warm {
		c.shell.Started = time.Now()
	}
	child, err := e.spawner.Spawn(c.shell)
	c.closePipes(false) // the child's ends: the child holds them now
	if err != nil {
		c.closePipes(true)
		c.stdout.Close()
		c.stderr.Close()
		return nil, &shell.SpawnError{Err: err}
	}
	c.child = child
	e.mu.Lock()
	e.live[c] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	if warm {
		c.startCopying(nil, false) // stdin is the command's, written by activate
		go c.wait()
		return c, nil
	}
	c.startCopying(s.Stdin, true)
	if c.timeout > 0 {
		c.timer = time.AfterFunc(c.timeout, func() { c.stop(causeTimeout, false) })
	}
	go c.wait()
	return c, nil
}

// heldOpenWait is how long drainReady waits for the end of a pipe that
// has no bytes left before it calls the pipe held open.
const heldOpenWait = 20 * time.Millisecond

// drainReady moves into s what pipe r holds right now, without waiting
// for more, after a read deadline cut r's drain; r's deadline is cleared.
// It reports whether a writer still holds the pipe open: the pipe did
// not reach its end, or kept filling up as fast as it was read.
func drainReady(r *os.File, s *capture.Stream) (heldOpen bool) {
	r.SetReadDeadline(time.Time{})
	rc, err := r.SyscallConn()
	if err != nil {
		return true
	}
	heldOpen = true
	rc.Read(func(fd uintptr) bool {
		// What is there now, and at most one pipe buffer more: a writer
		// that keeps writing must not keep us here.
		budget, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
		if err != nil {
			budget = 0
		}
		budget += 64 << 10
		var buf [32 << 10]byte
		waited := false
		for budget > 0 {
			n, err := unix.Read(int(fd), buf[:])
			switch {
			case err == unix.EINTR:
				continue
			case n > 0:
				s.Write(buf[:n])
				budget -= n
				continue
			case n == 0 && err == nil:
				heldOpen = false // the end: no writer is left
			case err == unix.EAGAIN && !waited:
				// A child another goroutine is starting holds a copy
				// of the write end from its fork until its exec: let
				// the spawns in flight finish, and give other forks a
				// moment, before calling the pipe held.
				waited = true
				proc.WaitSpawns()
				if readable(int(fd), heldOpenWait) {
					continue
				}
			}
			break
		}
		return true // never wait for readiness
	})
	return heldOpen
}

// readable waits up to d for fd to have bytes or reach its end. A signal
// does not cut the wait short: poll(2) is never restarted after one, and
// any signal to the process (SIGCHLD, the Go runtime's SIGURG) may land
// on this thread.
func readable(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		ms := max(0, int((left+time.Millisecond-1)/time.Millisecond))
		k, err := unix.Poll(pfd, ms)
		if err != unix.EINTR {
			return k > 0
		}
		if ms == 0 {
			return false
		}
	}
}

// openPipes makes the pipes of stdout, stderr and (with stdin) stdin.
func (c *command) openPipes(stdin bool) error {
	var err error
	var outW, errW, inR *os.File
	if c.stdoutR, outW, err = pipe(true); err != nil {
		return err
	}
	if c.stderrR, errW, err = pipe(true); err != nil {
		c.stdoutR.Close()
		outW.Close()
		return err
	}
	c.shell.Stdout, c.shell.Stderr = outW, errW
	if stdin {
		if c.stdinW, inR, err = pipe(false); err != nil {
			c.closePipes(false)
			c.closePipes(true)
			return err
		}
		c.shell.Stdin = inR
	}
	return nil
}

// pipe makes a pipe whose end for us (the read end if weRead) is in the
// Go runtime's poller, for the drain's deadlines, and whose end for the
// child is a plain blocking descriptor, as a child expects its standard
// descriptors. os.Pipe puts both ends in the poller: the child's end then
// cost its registration, its removal and, when a spawn takes its
// descriptor (File.Fd), a return to blocking mode, on every command.
func pipe(weRead bool) (ours, theirs *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	o, t := p[0], p[1]
	if !weRead {
		o, t = t, o
	}
	// F_SETFL ignores the access mode: O_NONBLOCK is the only flag set.
	if _, err := unix.FcntlInt(uintptr(o), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(o)
		unix.Close(t)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	// A non-blocking descriptor's File is in the poller; a blocking
	// one's is not.
	return os.NewFile(uintptr(o), "|ours"), os.NewFile(uintptr(t), "|theirs"), nil
}

// closePipes closes the child's ends of the pipes, or with parent ours.
func (c *command) closePipes(parent bool) {
	if parent {
		for _, f := range []*os.File{c.stdoutR, c.stderrR, c.stdinW} {
			if f != nil {
				f.Close()
			}
		}
		return
	}
	for _, f := range []*os.File{c.shell.Stdout, c.shell.Stderr, c.shell.Stdin} {
		if f != nil {
			f.Close()
		}
	}
}

// startCopying starts the goroutines that capture stdout and stderr and
// write stdin.
func (c *command) startCopying(stdin []byte, writeStdin bool) {
	c.drained = make(chan struct{})
	var open atomic.Int32
	open.Store(2)
	for _, p := range []struct {
		r *os.File
		s *capture.Stream
	}{{c.stdoutR, c.stdout}, {c.stderrR, c.stderr}} {
		c.copying.Go(func() {
			_, err := p.s.ReadFrom(p.r)
			if errors.Is(err, os.ErrDeadlineExceeded) && drainReady(p.r, p.s) {
				c.leftRunning.Store(true)
			}
			if open.Add(-1) == 0 {
				close(c.drained)
			}
		})
	}
	if c.stdinW != nil && writeStdin {
		// Written once, then closed. A child that never reads it and
		// exits makes the write fail (EPIPE); one whose stdin outlives it
		// is cut off when the drain ends.
		c.copying.Go(func() {
			c.stdinW.Write(stdin)
			c.stdinW.Close()
		})
	}
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (e *Executor) forget(c *command) {
	e.mu.Lock()
	delete(e.live, c)
	e.mu.Unlock()
}

// wait follows the shell to its end: its exit, then the drain of its
// pipes (at most the grace after the exit, so a grandchild holding them
// cannot hang us), then any kill in flight, and only then the reap, so
// that no kill ever signals the group after its leader's pid was freed.
func (c *command) wait() {
	ws, exitErr := c.child.Wait()
	c.mu.Lock()
	c.shellExited = true
	timer := c.timer // activate arms a warm shell's while it waits
	c.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	drained := false
	if exitErr == nil {
		drain := time.NewTimer(c.e.opts.Grace)
		select {
		case <-c.drained:
			drained = true
		case <-drain.C:
		}
		drain.Stop()
	}
	if !drained {
		// The drain is cut: the readers stop waiting, take what the pipes
		// already hold (every byte written before the shell exited is
		// there) and end.
		now := time.Now()
		c.stdoutR.SetReadDeadline(now)
		c.stderrR.SetReadDeadline(now)
	}
	if c.stdinW != nil {
		c.stdinW.Close() // a stdin nobody reads
	}
	c.copying.Wait()
	c.closePipes(true)

	c.mu.Lock()
	c.reaping = true
	killDone := c.killDone
	c.mu.Unlock()
	if killDone != nil {
		<-killDone
	}
	// Released before done: a caller's KillLeftovers once done is closed
	// must find the shell reaped, or the default spawner's tracker would
	// take the group for the shell's own and spare it (a background job
	// of the command outlived the kill, then counted 0).
	c.child.Release()
	switch {
	case exitErr != nil:
		code := -1
		c.exitCode = &code
	case ws.Signaled():
		c.signal = proc.SignalName(ws.Signal())
	default:
		code := ws.ExitStatus()
		c.exitCode = &code
	}
	// The spawner's findings are made once, on the whole output, before
	// the streams close: a background read to a closed stream's end
	// releases its bytes.
	if a, ok := c.e.spawner.(Annotator); ok {
		res := c.result()
		a.Annotate(c.shell, c.child, &res)
		c.notes, c.sandbox = res.Notes, res.Sandbox
	}
	c.stdout.Close()
	c.stderr.Close()
	// The next command's shell is started, or not, before this one is
	// done: EndOwner, once its owner's commands are done, finds it.
	c.e.prewarm(c)
	// Out of the live commands before it is done: a next command that
	// ended before this goroutine ran again counted it as still running
	// and started no warm shell (TestWarmShellContained's leftover once
	// waited 30 s in CI for a warm shell to try its injection on).
	c.e.forget(c)
	close(c.done)
	c.e.wg.Done()
}

// stop kills the command's group for cause, and what the command left
// outside it (escapees), unless another cause came first or the shell is
// being reaped; a timeout no longer counts once the shell has exited (the
// exit came first). With async it returns at once, else once all is gone.
// It reports whether it started a kill.
func (c *command) stop(cause int32, async bool) bool {
	c.mu.Lock()
	if c.cause != causeNone || c.reaping || cause == causeTimeout && c.shellExited {
		c.mu.Unlock()
		return false
	}
	c.cause = cause
	done := make(chan struct{})
	c.killDone = done
	c.mu.Unlock()
	kill := func() {
		defer close(done)
		// The group first, then what the command left outside it,
		// looked for once the group is gone (it may have made more
		// while it died).
		if s, ok := c.child.(Stopper); ok {
			s.Stop(c.e.opts.Grace)
			return
		}
		c.child.Terminate(c.e.opts.Grace)
		c.child.KillLeftovers()
	}
	if async {
		go kill() // wait() awaits it before the command settles
	} else {
		kill()
	}
	return true
}

// Leftovers implements shell.Leftovers with the Spawner's Child, which
// knows what the command started (a LeftoverCounter).
func (c *command) Leftovers() (int, error) {
	if !c.settled() {
		return 0, nil
	}
	lc, ok := c.child.(LeftoverCounter)
	if !ok {
		return 0, errors.ErrUnsupported
	}
	return lc.Leftovers()
}

// KillLeftovers implements shell.Leftovers: the Child's KillLeftovers,
// which takes everything still charged to the command once it was
// released.
func (c *command) KillLeftovers() error {
	if !c.settled() {
		return nil
	}
	return c.child.KillLeftovers()
}

func (c *command) causeOf() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

func (c *command) Done() <-chan struct{} { return c.done }

func (c *command) settled() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Status implements shell.Process: killed when a signal ended the shell or
// a caller killed it (even if it then exited 0).
func (c *command) Status() shell.Status {
	if !c.settled() {
		return shell.StatusRunning
	}
	if c.signal != "" || c.causeOf() != causeNone {
		return shell.StatusKilled
	}
	return shell.StatusCompleted
}

func (c *command) ExitCode() *int {
	if !c.settled() {
		return nil
	}
	return c.exitCode
}

func (c *command) Signal() string {
	if !c.settled() {
		return ""
	}
	return c.signal
}

// Kill implements shell.Process. The group kill runs on its own; Kill
// returns at once.
func (c *command) Kill() bool { return c.stop(causeKill, true) }

// Read implements shell.Process: the new bytes of each stream and, when
// unread bytes were dropped from memory, where the whole streams are.
func (c *command) Read() shell.ReadResult {
	var r shell.ReadResult
	r.Stdout, r.StdoutSkipped = c.stdout.Next()
	r.Stderr, r.StderrSkipped = c.stderr.Next()
	r.StdoutBinary, r.StderrBinary = c.stdout.Binary(), c.stderr.Binary()
	if r.StdoutSkipped.Bytes > 0 || r.StderrSkipped.Bytes > 0 || r.StdoutBinary || r.StderrBinary {
		r.Lossy = true
		if r.StdoutSpill = c.stdout.SpillPath(); r.StdoutSpill == "" {
			r.StdoutSpillErr = c.stdout.SpillErr()
		}
		if r.StderrSpill = c.stderr.SpillPath(); r.StderrSpill == "" {
			r.StderrSpillErr = c.stderr.SpillErr()
		}
	}
	return r
}

// Peek implements shell.Process.
func (c *command) Peek(maxBytes int) shell.ReadResult {
	return shell.ReadResult{Stdout: c.stdout.Peek(maxBytes), Stderr: c.stderr.Peek(maxBytes)}
}

// Follow implements shell.Follower.
func (c *command) Follow(from shell.Offsets) shell.Followed {
	var f shell.Followed
	f.Stdout, f.Next.Stdout, f.Skipped.Stdout = c.stdout.Since(from.Stdout)
	f.Stderr, f.Next.Stderr, f.Skipped.Stderr = c.stderr.Since(from.Stderr)
	return f
}

func (c *command) Written() (stdout, stderr int64) { return c.stdout.Len(), c.stderr.Len() }

func (c *command) Result() shell.Result {
	<-c.done
	res := c.result()
	res.Notes, res.Sandbox = c.notes, c.sandbox
	return res
}

// result is the outcome without the spawner's findings.
func (c *command) result() shell.Result {
	res := shell.Result{
		ExitCode:    c.exitCode,
		Signal:      c.signal,
		Timeout:     c.timeout,
		Stdout:      c.stdout.Output(),
		Stderr:      c.stderr.Output(),
		LeftRunning: c.leftRunning.Load(),
	}
	switch c.causeOf() {
	case causeTimeout:
		res.TimedOut = true
	case causeAbort, causeKill, causeClose:
		res.Aborted = true
	}
	return res
}
