package local

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/shell"
)

// ErrNoSandbox is the spawn error of a command whose Request narrows a
// sandbox (shell.Request.Narrowing) on a Spawner that has none to
// narrow: the command is refused rather than run without the sandbox its
// project asked for.
var ErrNoSandbox = errors.New("this executor runs commands without a sandbox, so it cannot narrow one")

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
	// commands itself, and ends what runs as this process's descendants
	// with its own bookkeeping.
	EndOwner(owner string)
	// Close kills everything any command left running where the Spawner
	// runs them, waits until it is gone and releases its resources. It is called once, after
	// the executor stopped its running commands; children not yet
	// released are released afterwards.
	Close() error
}

// Annotator is implemented by a Spawner with findings of its own about a
// finished command (the contained provider's sandbox denials, which it
// keeps with each Child): the executor lets it add them to the
// command's Result once, when the command ends and its Child has been
// released, with its whole output kept in memory.
type Annotator interface {
	Annotate(c Command, ch Child, r *shell.Result)
}

// TerminalOpener is implemented by a Spawner that opens the
// pseudo-terminals of its commands itself (the contained provider: in
// the session's own devpts instance, so that the program can name its
// terminal and no other session can open it). StartTerminal then asks it
// for the terminal of c, instead of opening one in this process.
type TerminalOpener interface {
	OpenTerminal(c Command) (master, tty *os.File, err error)
}

// Command is one shell for a Spawner to start.
type Command struct {
	// Command is the program: its path, arguments, environment and
	// directory, its standard descriptors (a nil Stdin is /dev/null), and
	// whether Stdin is a terminal to become the session's controlling
	// one.
	proc.Command
	// Owner is the command's Request.Owner, for EndOwner.
	Owner string
	// Workspace is the command's Request.Workspace: its owner's working
	// directory ("" for the executor's Cwd).
	Workspace string
	// Narrowing is the command's Request.Narrowing: a Spawner that
	// cannot make the command's sandbox that strict refuses it (the
	// default one, which has no sandbox, refuses any).
	Narrowing *shell.SandboxNarrowing
	// Grants is the command's Request.Grants: a Spawner with a sandbox
	// runs the command in one that lets it write them too; one without
	// ignores them.
	Grants []string
	// Grace is the executor's delay between SIGTERM and SIGKILL, for
	// the kills of what the command leaves running.
	Grace time.Duration
	// Started is when the command started, for an Annotator that keeps
	// anything of a command's by its time (the contained provider's
	// network denials): set by the executor before Spawn; a warm shell's
	// (docs/executor.md#warm-shells) is reset when its command is given
	// to it, and is the zero time until then.
	Started time.Time
}

// Child is a shell a Spawner started: the leader of its own process
// group, and of its own session but for the contained provider's
// commands without a terminal (in its init's session:
// docs/containment.md#spawning-and-waiting). The executor calls Wait
// once, Terminate and KillLeftovers (or Stop, for a Stopper) while no
// Release is in flight, and Release once, last, after Wait returned and
// every kill finished; *nsinit.Child has this shape.
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
	// group id may be reused. KillLeftovers may still be called after
	// it, and then takes the members of the group that outlived the
	// shell too.
	Release()
}

// Stopper is implemented by a Child that makes the executor's kill,
// Terminate and then KillLeftovers, in one step for less: the contained
// provider's, in one request to its init (docs/containment.md#killing-what-a-command-left).
type Stopper interface {
	Stop(grace time.Duration) error
}

// LeftoverCounter is implemented by Children that can count what the
// command left running once its shell was released (shell.Leftovers).
type LeftoverCounter interface {
	// Leftovers counts the live processes the command started, its
	// shell aside: the members of its group and what left it. A process
	// that forks and exits in a loop counts as one.
	Leftovers() (int, error)
}
