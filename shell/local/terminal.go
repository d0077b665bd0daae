//go:build linux

package local

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/capture"
	"github.com/conch-dev/conch/internal/envpolicy"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/shell"
)

var (
	_ shell.Terminals = (*Executor)(nil)
	_ shell.Follower  = (*terminal)(nil)
)

// StartTerminal implements shell.Terminals: bash -c s.Command on a new
// pseudo-terminal (internal/term), started by the executor's Spawner
// like every command, with the environment of the executor's other
// commands except TERM (the emulator's, xterm-256color) and standard
// input (the terminal, not /dev/null). It is spawned for s.Owner, so
// EndOwner and Close take it and what it leaves running; Close waits
// until the terminal is released.
func (e *Executor) StartTerminal(s shell.Spec) (shell.Terminal, error) {
	if err := checkWorkdir(s.Workdir); err != nil {
		return nil, err
	}
	// A warm shell runs beside no other command: none is started while
	// the terminal runs, and one waiting is stopped.
	ended := func() {}
	if e.opts.Warm {
		ended = e.hold()
		e.takeWarm(s, false)
	}
	e.startMu.RLock()
	defer e.startMu.RUnlock()
	if e.closed {
		ended()
		return nil, shell.ErrClosed
	}
	raw := capture.NewStream(e.spill.For(s.Owner), "tty", e.opts.MaxOutputBytes, e.opts.MaxSpillBytes)
	// Through the spawn hook, as every command: a contained executor runs
	// the terminal's program inside its init's namespaces and sandbox.
	c := Command{
		Command: proc.Command{
			Path:     e.opts.Shell,
			Args:     []string{"bash", "-c", s.Command},
			Env:      term.Env(envpolicy.Build(e.baseEnv, s.Workdir, s.Env, s.ManagedEnv)),
			Dir:      s.Workdir,
			Terminal: true,
		},
		Owner:     s.Owner,
		Workspace: s.Workspace,
		Narrowing: s.Narrowing,
		Grants:    s.Grants,
		Grace:     e.opts.Grace,
	}
	tm := &terminal{raw: raw}
	spawn := func(tty *os.File) (term.Process, error) {
		c := c
		c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
		c.Started = time.Now()
		ch, err := e.spawner.Spawn(c)
		if a, ok := e.spawner.(Annotator); ok && err == nil {
			// The spawner's findings are made once the program has
			// exited and before its release, as for a piped command.
			return &annotated{Child: ch, annotate: func() {
				var r shell.Result
				a.Annotate(c, ch, &r)
				tm.mu.Lock()
				tm.notes, tm.sandbox = r.Notes, r.Sandbox
				tm.mu.Unlock()
			}}, nil
		}
		return ch, err
	}
	topts := &term.Options{Raw: raw, Grace: e.opts.Grace}
	if o, ok := e.spawner.(TerminalOpener); ok {
		topts.Open = func() (*os.File, *os.File, error) { return o.OpenTerminal(c) }
	}
	t, err := term.Start(spawn, topts)
	if err != nil {
		ended()
		raw.Close()
		return nil, &shell.SpawnError{Err: err}
	}
	e.wg.Add(1) // Close waits for the terminal's release
	go func() {
		<-t.Done()
		ended()
		raw.Close()
		e.wg.Done()
	}()
	tm.Term = t
	return tm, nil
}

// terminal is a term.Term whose raw output is captured like a command's
// stdout: a bounded tail in memory and, past it, a spill file in the
// executor's spill directory (removed by Close).
type terminal struct {
	*term.Term
	raw *capture.Stream

	mu      sync.Mutex
	notes   []string // the spawner's findings (Annotator), set before Done
	sandbox *shell.SandboxReport
}

var _ shell.TerminalFindings = (*terminal)(nil)

// Findings implements shell.TerminalFindings.
func (t *terminal) Findings() ([]string, *shell.SandboxReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notes, t.sandbox
}

// annotated is a terminal's program whose release first runs the
// spawner's annotation: the init keeps a command's denial record until
// its release.
type annotated struct {
	Child
	annotate func()
}

func (a *annotated) Release() {
	a.annotate()
	a.Child.Release()
}

// Raw implements shell.Terminal. Once the terminal is done it closes the
// raw stream first (Close is idempotent), so that the spill file is
// complete and named whichever goroutine gets there first. While the
// program runs, it names the spill file being written, which holds the
// stream so far, as a running command's lossy read does.
func (t *terminal) Raw() shell.Output {
	select {
	case <-t.Done():
		t.raw.Close()
		return t.raw.Output()
	default:
	}
	o := t.raw.Output()
	if o.Truncated && o.SpillPath == "" && o.SpillErr == nil {
		o.SpillPath = t.raw.SpillPath()
	}
	return o
}

// Follow implements shell.Follower: the raw stream, every byte the
// program wrote (escape sequences and the terminal's "\r\n" included), as
// Stdout; a terminal has no separate Stderr.
func (t *terminal) Follow(from shell.Offsets) shell.Followed {
	var f shell.Followed
	f.Stdout, f.Next.Stdout, f.Skipped.Stdout = t.raw.Since(from.Stdout)
	return f
}

// checkWorkdir refuses a workdir that does not exist, is not a directory
// or may not be entered, with a *shell.WorkdirError naming it: the
// child's chdir would fail the same way, but as a spawn failure that does
// not name the directory.
func checkWorkdir(dir string) error {
	if fi, err := os.Stat(dir); err != nil {
		return &shell.WorkdirError{Path: dir, Err: unwrapPathError(err)}
	} else if !fi.IsDir() {
		return &shell.WorkdirError{Path: dir, Err: syscall.ENOTDIR}
	}
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.X_OK, unix.AT_EACCESS); err != nil {
		return &shell.WorkdirError{Path: dir, Err: err}
	}
	return nil
}
