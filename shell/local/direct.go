//go:build linux

package local

import (
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// direct is the default Spawner: each shell is a child of this process
// (a child subreaper, so that what the shell leaves is re-parented here),
// killed with the parent-death signal if this process dies, its
// escapees found by the executor's Tracker, which also ends what an owner
// or the executor leaves (so EndOwner and Close have nothing more to do).
type direct struct {
	tracker *proc.Tracker
	wrap    func(*exec.Cmd)
}

// Spawn implements Spawner.
func (d *direct) Spawn(c Command) (Child, error) {
	if c.Narrowing != nil {
		return nil, ErrNoSandbox
	}
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
	// A terminal's command takes its stdin (descriptor 0) as its
	// controlling terminal instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: c.Terminal, Pdeathsig: syscall.SIGKILL}
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

// EndOwner implements Spawner: the executor's tracker does it.
func (d *direct) EndOwner(string) {}

// Close implements Spawner: the executor's tracker does it.
func (d *direct) Close() error { return nil }

// directChild is a shell that is a child of this process. It is not
// reaped before Release: os/exec would reap it before its pipes are
// drained, and a kill during that drain would signal a process group
// whose leader is gone, whose id may be reused.
type directChild struct {
	d     *direct
	cmd   *exec.Cmd
	pgid  int
	grace time.Duration
	// leftoversTaken: the last Terminate killed what the command left
	// outside its group, after the group was gone.
	leftoversTaken atomic.Bool
	// released: the shell was reaped; what is left of its group is a
	// leftover too.
	released atomic.Bool
}

var _ LeftoverCounter = (*directChild)(nil)

func (c *directChild) Wait() (syscall.WaitStatus, error) {
	ws, err := proc.WaitExited(c.pgid)
	c.d.tracker.Exited(c.pgid)
	return ws, err
}

// Terminate kills what the command is already known to have left outside
// its group alongside the group, so that an escapee cannot go on during
// the grace; that kill goes on until the group is gone and nothing is
// left, so KillLeftovers has nothing more to do.
func (c *directChild) Terminate(grace time.Duration) (bool, error) {
	if !c.d.tracker.MayHaveLeftovers(c.pgid) {
		return proc.Terminate(c.pgid, grace), nil
	}
	gone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.d.tracker.KillCommand(c.pgid, c.grace, gone) })
	escalated := proc.Terminate(c.pgid, grace)
	close(gone)
	wg.Wait()
	c.leftoversTaken.Store(true)
	return escalated, nil
}

// KillLeftovers takes what is left outside the group, the group being
// gone or released to the caller's kill, unless the Terminate just before
// did. It looks without a scan of /proc first: most commands leave
// nothing.
func (c *directChild) KillLeftovers() error {
	if c.released.Load() {
		c.d.tracker.KillCommandAll(c.pgid, c.grace)
		return nil
	}
	if !c.leftoversTaken.Swap(false) && c.d.tracker.MayHaveLeftovers(c.pgid) {
		c.d.tracker.KillCommand(c.pgid, c.grace, nil)
	}
	return nil
}

func (c *directChild) Release() {
	proc.WaitCmd(c.cmd)
	c.released.Store(true)
}

// Leftovers implements LeftoverCounter: what the tracker finds of the
// command's sessions, the shell's own group included once it is gone.
func (c *directChild) Leftovers() (int, error) { return c.d.tracker.CountCommand(c.pgid), nil }
