package shell

import (
	"errors"
	"fmt"
	"time"
)

// Executor runs bash commands for a model. It is the seam between the
// layers above (tasks, tools, transports) and the providers below (local
// processes today; a sandbox and remote hosts later). Implementations are
// safe for concurrent use.
type Executor interface {
	// Resolve fills the executor's defaults into r, clamps the timeout to
	// the executor's maximum and refuses bad input (an empty command, a
	// negative timeout, a negative byte cap) with a *RequestError.
	// It does not touch the file system: a missing workdir is reported by
	// Launch or Start. A provider implements it with Limits.Resolve.
	Resolve(r Request) (Spec, error)

	// Start starts s in the background and returns at once. No timeout
	// applies; the caller stops the process with Kill. Start returns an
	// error for failures known before it returns (a missing workdir,
	// bash that cannot be started, a closed executor). A spawn failure
	// known only later (a provider that starts remotely) settles the
	// Process as StatusKilled, and its first Read carries
	// "spawn failed: <error>" in its stderr part, exactly once (see
	// FailedProcess).
	Start(s Spec) (Process, error)

	// Launch starts s as a foreground command that the caller watches:
	// s.Timeout applies (Result.TimedOut), Kill aborts it
	// (Result.Aborted), and it returns at once, so the caller can follow
	// its progress, read it incrementally, or leave it running in the
	// background (its timeout still applies). It returns an error only
	// for infrastructure failures: the workdir is missing, not a directory
	// or not enterable (*WorkdirError), bash cannot be started
	// (*SpawnError), or the executor is closed (ErrClosed). A non-zero
	// exit, a timeout kill, a kill and a command that signals itself are
	// the Process's Result. Run (a function of this package) is Launch
	// and a wait.
	Launch(s Spec) (Process, error)

	// Close kills every process the executor still runs (and, for
	// providers that can, every descendant that escaped its group), waits
	// until they are gone and releases the executor's resources (spill
	// files included). Run and Start fail with ErrClosed afterwards.
	// Close is idempotent.
	Close() error
}

// Graceful is implemented by executors whose kill escalates from SIGTERM
// to SIGKILL after a grace period. Grace reports that period, so that a
// caller who killed a process knows how long its end may take.
type Graceful interface {
	Grace() time.Duration
}

// OwnerEnder is implemented by executors that can end an owner: EndOwner
// kills every command still running for owner (Request.Owner) and
// everything those commands and the owner's earlier ones left running
// (group members that outlived a normal exit, and, where the provider can
// attribute them, processes that left their group), and returns once they
// are gone. Commands of other owners are left alone. The tool layer calls
// it when a session ends, after disposing of the session's tasks.
type OwnerEnder interface {
	EndOwner(owner string)
}

// Request is what a caller asks for. Only Command is required; every other
// field is optional and a field left at its zero value is "not given".
type Request struct {
	// Command is run as `bash -c Command`. Required, not blank.
	Command string
	// Workdir is the directory the command runs in. "" means the
	// executor's default. A relative path is resolved against that
	// default.
	Workdir string
	// Timeout bounds a foreground Run. 0 means the executor's default; a
	// value above the executor's maximum is clamped silently; a negative
	// value is refused by Resolve. It does not apply to Start.
	Timeout time.Duration
	// StdoutMaxBytes overrides the in-memory tail size of stdout. Only
	// trusted callers set it (a model never does). 0 means the executor's
	// default; negative is refused.
	StdoutMaxBytes int
	// Stdin is written to the command's standard input once, then the pipe
	// is closed. nil means standard input is /dev/null; a non-nil empty
	// slice gives an empty pipe.
	Stdin []byte
	// Env holds extra variables, applied after the executor's scrub and
	// its non-interactive defaults; an entry here survives the scrub.
	Env map[string]string
	// ManagedEnv is the overlay the tool layer sets (CONCH_SHELL,
	// CONCH_SESSION_ID, CONCH_HOME). It is applied last and wins over
	// everything else.
	ManagedEnv map[string]string
	// Owner names the caller's session that runs the command (the tool
	// layer sets its session id). What the command leaves running lives at
	// most until its owner ends (see OwnerEnder). "" is an owner like any
	// other.
	Owner string
	// Workspace is the owner's working directory, set by the tool layer
	// (the session's cwd; never the model): a provider that gives each
	// owner a boundary of its own builds it for the Workspace of the
	// owner's first command (a sandbox's writable workspace). "" means
	// the executor's default directory. See docs/executor.md.
	Workspace string
	// Narrowing, set by the tool layer from the project file of the
	// owner's workspace (never the model), makes the sandbox of the
	// owner's commands stricter. A provider that cannot make it so
	// refuses the command rather than run it in a wider sandbox; one that
	// starts a boundary per owner applies the Narrowing of the owner's
	// first command to all of them. Nil narrows nothing. See
	// docs/executor.md.
	Narrowing *SandboxNarrowing
	// Grants, set by the tool layer from its user's answers (never the
	// model), are directories the owner's user let its commands write
	// for the rest of the session (docs/sandbox.md#escalation): a
	// provider that gives each owner a sandbox runs the owner's commands
	// in one that adds them to its writable roots, from the first
	// command that carries them. A provider without a sandbox has
	// nothing to widen and ignores them. Nil grants nothing.
	Grants []string
}

// SandboxNarrowing is what a project file asks of its sessions' sandbox
// (docs/configuration.md#project-files): Mode, when not "", a mode at
// least as strict as the provider's ("read-only" or "workspace-write"),
// NetworkOff no network, DenyRead more hidden paths (absolute, or
// relative to the owner's workspace). Network, when not "", is a
// network mode at least as strict as the provider's ("public",
// "allowlist", "off"); NetworkDeny more deny patterns; NetworkAllow and
// NetworkAsk the allow list of an allowlist it narrows a wider mode to
// (docs/sandbox.md#network).
type SandboxNarrowing struct {
	Mode         string
	NetworkOff   bool
	DenyRead     []string
	Network      string
	NetworkAllow []string
	NetworkDeny  []string
	NetworkAsk   *bool
}

// Spec is a resolved Request: Workdir and Timeout hold the effective
// values; optional fields the caller did not give stay absent (nil or 0).
// A Spec is produced by Resolve of the executor that runs it.
type Spec struct {
	Command        string
	Workdir        string        // absolute
	Timeout        time.Duration // effective, clamped; foreground only
	StdoutMaxBytes int           // 0: the executor's default
	Stdin          []byte        // nil: /dev/null
	Env            map[string]string
	ManagedEnv     map[string]string
	Owner          string            // copied from the Request
	Workspace      string            // copied from the Request, cleaned
	Narrowing      *SandboxNarrowing // copied from the Request
	Grants         []string          // copied from the Request
}

// Output is the captured tail of one stream.
type Output struct {
	// Text is the last bytes of the stream (at most the executor's cap),
	// as valid UTF-8: a character cut by the tail boundary is dropped and
	// invalid bytes are replaced with U+FFFD.
	Text string
	// Truncated reports that the stream was longer than its cap, so Text
	// is only its tail.
	Truncated bool
	// SpillPath names a file holding the whole stream. It is set only when
	// Truncated and the file is complete and was closed without error;
	// otherwise it is "" and a model is told "(unavailable)".
	SpillPath string
	// Host names the host whose file SpillPath is: "" for this machine,
	// a remote host's name otherwise (shown to a model as
	// <host>:<path>).
	Host string
	// Head is the stream's first bytes (at most HeadBytes of them), kept
	// when the stream outgrew the tail, so that a reader can show the
	// start and the end of a long stream; "" when Truncated is false
	// (Text is then the whole stream).
	Head string
	// Size is the number of bytes the stream produced; Lines the number
	// of newline bytes among them. With Head and Text they give the
	// exact size of what lies between.
	Size, Lines int64
	// SpillErr says why SpillPath is "" for a Truncated stream: a
	// *SpillCapError when the stream outgrew the spill cap, another error
	// when the file could not be written. nil otherwise.
	SpillErr error
	// Binary reports that the stream is mostly not text: more than a
	// tenth of its first 8 KiB (of all of it, when shorter) are NUL or
	// control bytes other than tab, newline, carriage return and escape.
	// A binary stream has its spill file (SpillPath,
	// or SpillErr saying why not) even when it is not Truncated, so that
	// a reader can name the file instead of showing the bytes.
	Binary bool
}

// HeadBytes is the most a provider keeps of a stream's start (Output.Head).
const HeadBytes = 2000

// SpillCapError reports a stream whose spill file was deleted because the
// stream grew past the provider's spill cap.
type SpillCapError struct{ Cap int64 }

func (e *SpillCapError) Error() string { return fmt.Sprintf("over the %d-byte spill cap", e.Cap) }

// Omission is a stretch of a stream that a reader will not get from
// memory: Bytes bytes holding Lines newline bytes.
type Omission struct{ Bytes, Lines int64 }

// Result is the outcome of a foreground Run.
type Result struct {
	// ExitCode is the shell's exit code; nil when a signal ended it.
	ExitCode *int
	// Signal names the signal that ended the shell ("SIGTERM", "SIGKILL",
	// ...); "" when it exited.
	Signal string
	// TimedOut: the executor's own timeout fired first and the executor
	// killed the command. It is set even when the command then exited 0.
	// A timeout that falls after the shell exited on its own (while a
	// grandchild still holds its output open) does not count: the exit
	// came first, and what the shell left running is left alone.
	TimedOut bool
	// Aborted: the caller's ctx was done first and the executor killed the
	// command. Never set together with TimedOut. A command that signals
	// itself has neither.
	Aborted bool
	// Timeout is the effective, clamped timeout.
	Timeout time.Duration
	// Stdout and Stderr are the captured tails.
	Stdout, Stderr Output
	// LeftRunning reports that the drain after the shell's exit was cut
	// at the grace because a process the command started still held its
	// output open; what it writes later is not captured.
	LeftRunning bool
	// Notes are the provider's own findings about the command, one line
	// each, which a result shows before its timeout and exit markers: a
	// sandboxed provider's denials ("[sandbox: …]").
	Notes []string
	// Sandbox is the sandbox the command ran under and what it denied;
	// nil when it ran without one.
	Sandbox *SandboxReport
}

// SandboxReport is the sandbox a command ran under and what it denied:
// Mode is "read-only", "workspace-write" or "full-access", Network the
// network mode ("on", "public", "allowlist" or "off").
type SandboxReport struct {
	Mode    string          `json:"mode"`
	Network string          `json:"network"`
	Denied  []SandboxDenial `json:"denied"`
}

// SandboxDenial is one operation a sandbox denied: Op is "write" (Path
// named), "network" (no path), or "connect" (Host and Port named, and
// the Reason of the network policy: "not in the allowlist", "denied by
// <pattern>", "a private address", "the host's own address", "the cloud
// metadata address", "the user declined", or "conch's own server";
// docs/sandbox.md#network).
type SandboxDenial struct {
	Path   string `json:"path,omitempty"`
	Host   string `json:"host,omitempty"`
	Port   int    `json:"port,omitempty"`
	Op     string `json:"op"`
	Reason string `json:"reason,omitempty"`
}

// Status is the life stage of a background Process.
type Status string

const (
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed" // exited on its own, whatever its exit code
	StatusKilled    Status = "killed"    // died by a signal, was killed by the caller, or never started
)

// Process is a command started in the background. It settles once:
// StatusRunning → StatusCompleted | StatusKilled.
type Process interface {
	// Status reports the current status.
	Status() Status
	// ExitCode is the exit code once settled by an exit; nil while running
	// or when a signal ended it.
	ExitCode() *int
	// Signal names the signal that ended the shell, once settled; "" else.
	Signal() string
	// Done is closed when the process has settled and its output is
	// complete (pipes drained or their drain bounded).
	Done() <-chan struct{}
	// Read returns the output produced since the previous Read (it
	// consumes). It works while running and after settling; with nothing
	// new it returns a zero ReadResult.
	Read() ReadResult
	// Peek returns the end of what the next Read would return, without
	// consuming it (the next Read returns the same bytes): at most
	// maxBytes of each stream, as valid UTF-8, starting after a newline
	// when it leaves bytes out and a newline lies within them, else at a
	// character boundary. Only Stdout and Stderr are set.
	Peek(maxBytes int) ReadResult
	// Kill asks the process group to stop (SIGTERM, SIGKILL after the
	// grace). It returns true the first time it is called while the
	// process runs and false once settled or already killed. After Kill
	// the status is StatusKilled, even if the process then exits 0.
	Kill() bool
	// Result is the foreground-shaped outcome: exit code or signal,
	// TimedOut (Launch only), Aborted (Kill or Close came first) and the
	// captured tails. Valid once Done is closed.
	Result() Result
	// Written reports how many bytes each stream has produced so far.
	Written() (stdout, stderr int64)
}

// Leftovers is implemented by processes whose provider can tell and end
// what a command left running once its shell has ended
// (docs/executor.md#leftover-processes): the members of its process
// group that outlived it and, where the provider attributes them, the
// processes that left the group (setsid, double forks) and their
// descendants. A background task reports them in its status, and its
// kill ends them (docs/tasks.md#task_kill).
type Leftovers interface {
	// Leftovers counts the processes the command started that are still
	// running. It is 0 until the process has settled (Done is closed). A
	// process that forks and exits in a loop counts as at least one,
	// although no look at the process table may find it alive.
	Leftovers() (int, error)
	// KillLeftovers kills them (SIGTERM, then SIGKILL after the
	// provider's grace, or SIGKILL at once) and returns once they are
	// gone. Before the process has settled it does nothing: Kill stops a
	// running command and what it started.
	KillLeftovers() error
}

// ReadResult is one incremental read of a background process.
type ReadResult struct {
	// Stdout and Stderr are the new bytes of each stream, as valid UTF-8.
	Stdout, Stderr string
	// Lossy reports that bytes this reader had not yet seen were dropped
	// from memory; Stdout/Stderr then hold the whole retained tail.
	Lossy bool
	// StdoutSpill and StderrSpill name the spill files holding the whole
	// streams, set on lossy reads when the file is still safe to name.
	StdoutSpill, StderrSpill string
	// Host names the host whose files StdoutSpill and StderrSpill are
	// ("" for this machine; see Output.Host).
	Host string
	// StdoutSkipped and StderrSkipped measure, on a lossy read, the bytes
	// that were dropped from memory before this reader saw them (they
	// lie just before the text of this read).
	StdoutSkipped, StderrSkipped Omission
	// StdoutSpillErr and StderrSpillErr say why a lossy read names no
	// spill file for that stream (see Output.SpillErr).
	StdoutSpillErr, StderrSpillErr error
	// StdoutBinary and StderrBinary report a binary stream (see
	// Output.Binary); its spill file is then named whether the read is
	// lossy or not.
	StdoutBinary, StderrBinary bool
}

// Empty reports that the read carried nothing new.
func (r ReadResult) Empty() bool { return r.Stdout == "" && r.Stderr == "" && !r.Lossy }

// ErrClosed is returned by Launch, Start and Run after Close.
var ErrClosed = errors.New("shell: executor is closed")

// ErrAbortedBeforeSpawn is wrapped by the error Run returns when its ctx
// was already done before the command was spawned. The error's text is
// "aborted before spawn: <reason>".
var ErrAbortedBeforeSpawn = errors.New("aborted before spawn")

// AbortedBeforeSpawn builds the error for a ctx that was done before the
// spawn; errors.Is(err, ErrAbortedBeforeSpawn) holds.
func AbortedBeforeSpawn(cause error) error {
	return fmt.Errorf("%w: %v", ErrAbortedBeforeSpawn, cause)
}

// RequestError is a Request that Resolve refused.
type RequestError struct {
	Field  string // "Command", "Timeout", ...
	Reason string
}

func (e *RequestError) Error() string { return "shell: invalid request: " + e.Field + " " + e.Reason }

// WorkdirError reports a workdir that does not exist, is not a directory,
// or may not be entered (EACCES).
type WorkdirError struct {
	Path string
	Err  error
}

func (e *WorkdirError) Error() string { return "workdir " + e.Path + ": " + e.Err.Error() }
func (e *WorkdirError) Unwrap() error { return e.Err }

// SpawnError reports that bash could not be started.
type SpawnError struct{ Err error }

func (e *SpawnError) Error() string { return "spawn failed: " + e.Err.Error() }
func (e *SpawnError) Unwrap() error { return e.Err }

// Follower is implemented by processes whose output can be followed as it
// is produced without consuming it: Follow does not move Read's cursor, so
// a transport can show a command's output live while the command's reads
// (a yield, a task) still get every byte.
type Follower interface {
	// Follow returns each stream's bytes from the offsets in from up to
	// what it has produced so far, as valid UTF-8; a character split by a
	// write is held back until its end arrives or the stream ends.
	// Next holds the offsets to pass the following time; Skipped counts
	// the bytes from from on that had already left memory (they lie just
	// before the returned text).
	Follow(from Offsets) Followed
}

// Offsets are positions in a process's streams, counted in bytes from
// their first byte.
type Offsets struct{ Stdout, Stderr int64 }

// Followed is one Follow of a process's output.
type Followed struct {
	Stdout, Stderr string
	Next, Skipped  Offsets
}
