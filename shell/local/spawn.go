package local

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// Spawner starts the shell of each command. It is the local provider's
// spawn hook: a provider that runs commands elsewhere than as direct
// children of this process (inside a per-session init in its own PID
// namespace, say) is the local provider plus a Spawner, and keeps the
// local provider's pipes, capture, timeouts, kill causes and Results.
// The default (Options.Spawner nil) starts each shell as a direct child
// of this process (see Options.Wrap).
//
// Spawn is called from an ordinary goroutine, never one locked to its OS
// thread, with Close ordered after every Spawn that returned. A Spawner
// that forks from a thread of its own must keep that thread alive as
// long as the commands it forked: the parent-death signal a child may be
// given (Pdeathsig) fires when the thread that forked it exits, not when
// the process does, so a fork from a goroutine locked with
// runtime.LockOSThread that later exits kills the child at once.
type Spawner interface {
	// Spawn starts c in a new session and process group and returns it.
	// c's files are the caller's: Spawn must not keep them open (the
	// caller closes them once Spawn returns, so that the pipes reach
	// their end when the command's processes are gone).
	Spawn(c Command) (Child, error)
	// EndOwner kills what the commands spawned for owner left running
	// (after their shells exited, or outside their groups) and returns
	// once it is gone. The executor has stopped the owner's running
	// commands itself.
	EndOwner(owner string)
	// Close kills everything any command left running, waits until it is
	// gone and releases the Spawner's resources. It is called once, after
	// the executor stopped its running commands; children not yet
	// released are released afterwards.
	Close() error
}

// Command is one shell for a Spawner to start.
type Command struct {
	// Path is the executable; Args its arguments, Args[0] included.
	Path string
	Args []string
	// Env is the whole environment; Dir the working directory.
	Env []string
	Dir string
	// Stdin, Stdout and Stderr become descriptors 0, 1 and 2; a nil
	// Stdin means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Owner is the command's Request.Owner, for EndOwner.
	Owner string
	// Grace is the executor's delay between SIGTERM and SIGKILL, for
	// the kills of what the command leaves running.
	Grace time.Duration
}

// Child is a shell a Spawner started: the leader of its own session and
// process group. The executor calls Wait once, Terminate and
// KillLeftovers while no Release is in flight, and Release once, last,
// after Wait returned and every kill finished; *nsinit.Child has this
// shape.
type Child interface {
	// Wait waits for the shell to exit and returns its wait status (an
	// exit code or the signal that ended it) without releasing it: its
	// process group id stays its own, so Terminate stays safe, until
	// Release.
	Wait() (syscall.WaitStatus, error)
	// Terminate stops the process group: SIGTERM, SIGKILL if anything of
	// it is alive after grace, and a bounded wait until it is gone. A
	// Child that already knows of processes the command started outside
	// its group may kill them meanwhile.
	Terminate(grace time.Duration) (escalated bool, err error)
	// KillLeftovers kills everything the command started that is still
	// alive, in its group or outside it (setsid, double fork), and
	// returns once it is gone. The executor calls it after each
	// Terminate; it should cost little when there is nothing to kill.
	KillLeftovers() error
	// Release lets the shell go: its zombie is reaped and its process
	// group id may be reused.
	Release()
}

// direct is the default Spawner: each shell is a child of this process
// (a child subreaper, so that what the shell leaves is re-parented here),
// killed with the parent-death signal if this process dies, its
// escapees found by a Tracker.
type direct struct {
	tracker *proc.Tracker
	grace   time.Duration
	wrap    func(*exec.Cmd)
}

func newDirect(grace time.Duration, wrap func(*exec.Cmd)) (*direct, error) {
	if err := proc.BecomeSubreaper(); err != nil {
		return nil, err
	}
	return &direct{tracker: proc.NewTracker(), grace: grace, wrap: wrap}, nil
}

// Spawn implements Spawner.
func (d *direct) Spawn(c Command) (Child, error) {
	// exec.Command, not a bare exec.Cmd: GODEBUG=execwait=2 then catches a
	// command that was never waited for.
	cmd := exec.Command(c.Path, c.Args[1:]...)
	cmd.Args[0] = c.Args[0]
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	if c.Stdin != nil {
		cmd.Stdin = c.Stdin
	}
	// The command's own pgid and sid: signals reach the whole group, and
	// no terminal can become its controlling one. The parent-death signal
	// stops the shell if this server is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if d.wrap != nil {
		d.wrap(cmd)
	}
	if err := proc.StartCmd(cmd); err != nil {
		return nil, err
	}
	pgid := cmd.Process.Pid
	d.tracker.Add(pgid, c.Owner)
	return &directChild{d: d, cmd: cmd, pgid: pgid, grace: c.Grace}, nil
}

// EndOwner implements Spawner.
func (d *direct) EndOwner(owner string) { d.tracker.KillOwner(owner, d.grace) }

// Close implements Spawner.
func (d *direct) Close() error {
	d.tracker.KillAll(d.grace)
	return nil
}

// directChild is a shell that is a child of this process. It is not
// reaped before Release: os/exec would reap it before its pipes are
// drained, and a kill during that drain would signal a process group
// whose leader is gone, whose id may be reused.
type directChild struct {
	d     *direct
	cmd   *exec.Cmd
	pgid  int
	grace time.Duration
}

func (c *directChild) Wait() (syscall.WaitStatus, error) {
	ws, err := proc.WaitExited(c.pgid)
	c.d.tracker.Exited(c.pgid)
	return ws, err
}

// Terminate kills what the command is already known to have left outside
// its group alongside the group, so that an escapee cannot go on during
// the grace.
func (c *directChild) Terminate(grace time.Duration) (bool, error) {
	var wg sync.WaitGroup
	if c.d.tracker.MayHaveLeftovers(c.pgid) {
		wg.Go(func() { c.d.tracker.KillCommand(c.pgid, c.grace) })
	}
	escalated := proc.Terminate(c.pgid, grace)
	wg.Wait()
	return escalated, nil
}

// KillLeftovers takes what is left outside the group, the group being
// gone or released to the caller's kill. It looks without a scan of
// /proc first: most commands leave nothing.
func (c *directChild) KillLeftovers() error {
	if c.d.tracker.MayHaveLeftovers(c.pgid) {
		c.d.tracker.KillCommand(c.pgid, c.grace)
	}
	return nil
}

func (c *directChild) Release() { proc.WaitCmd(c.cmd) }
