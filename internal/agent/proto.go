// Package agent is the protocol between conch and `conch agent`, the
// conch that runs the commands on a remote host, and the agent's side of
// it.
//
// # Frames
//
// Both directions carry frames (internal/frame, as the init's protocol):
// a 4-byte big-endian length, then that
// many bytes of one JSON object. A frame is at most MaxFrame bytes; a
// longer one ends the connection (a peer that is not conch, or a broken
// stream, must not make the other side allocate without bound).
//
// # Messages
//
// The client sends Requests, each with a fresh ID; the agent answers each
// with one Response of the same ID, in any order (a slow Close does not
// hold back a Read). The agent also sends notifications, Responses with
// ID 0: Op "done" when a process it started has settled, carrying its
// Result, after the Response to the Start that created it.
//
// The first Request is "hello" with the client's Version; the agent
// answers with its own Hello, or with an Error of kind "version" when it
// does not speak that version, and then serves the other operations:
// "start" (Launch or Start of a Spec; the client names the process with
// Proc), "read" and "peek" (a process's ReadResult), "kill", "written",
// "release" (the client holds the process no more: the agent forgets it),
// "end-owner" (kill what the commands started with that Owner still run
// or left running, wait until it is gone, answer) and "close" (kill
// everything, wait until it is gone, answer). When the agent's input
// ends, it kills everything it started.
//
// "term-start" starts a terminal (shell.Terminals.StartTerminal) of the
// StartArgs' command, workdir, environment and owner; the client names it
// with Proc, as a process. "read", "peek", "written", "kill" and "release"
// then apply to it as to a process (a read's text is in Read.Stdout, the
// raw stream's size in Written[0]), "input" types into it (InputArgs; the
// answer in Read.Stdout, or an Error of kind "other" with the terminal's
// own words), "raw" answers with its raw stream so far (Raw: its size,
// tail and spill file), and its "done" carries its exit and its raw
// stream as Stdout.
//
// While a foreground process (a Start that is not Background) runs and
// the client has not read it, the agent also sends "output"
// notifications, at most every OutputInterval and only when it wrote
// something: Read holds the end of its output so far (as Peek returns
// it, up to MaxOutput bytes a stream) and Written its sizes. They let the
// client keep what a command printed before a lost connection cut it.
//
// "leftovers" answers how many processes a settled process left running
// (Count; shell.Leftovers), "kill-leftovers" kills them and answers once
// they are gone.
//
// "end-owner", StartArgs.Owner, "output", "term-start", "input", "raw",
// "leftovers" and "kill-leftovers" came
// after version 1 was first released, as additions that keep it version 1
// (a client ignores a notification it does not know, an agent answers an
// operation it does not know with an Error of kind "other"): an agent without them
// ignores the Owner and answers "end-owner" with an Error of kind
// "other", after which its owners end only when the connection does, as
// they did before.
package agent

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/frame"
	"github.com/conch-dev/conch/shell"
)

// Version is the protocol version this package speaks.
const Version = 1

// MaxOutput bounds each stream of an output notification.
const MaxOutput = 1 << 20

// MaxFrame bounds the JSON body of a frame: a start carries the command
// and its stdin, a done two tails of at most the executor's tail size.
const MaxFrame = 16 << 20

// Operations of a Request, and the Op of a notification.
const (
	OpHello     = "hello"
	OpStart     = "start"
	OpRead      = "read"
	OpPeek      = "peek"
	OpKill      = "kill"
	OpWritten   = "written"
	OpRelease   = "release"
	OpEndOwner  = "end-owner"
	OpClose     = "close"
	OpTermStart = "term-start" // start a terminal (shell.Terminals)
	OpInput     = "input"      // type into a terminal
	OpRaw       = "raw"        // a terminal's raw stream so far
	OpLeftovers = "leftovers"  // how many processes a settled process left running
	OpKillLeft  = "kill-leftovers"
	OpDone      = "done"   // notification: a process settled
	OpOutput    = "output" // notification: a foreground process's output so far
)

// OutputInterval is how often, at most, the agent sends a foreground
// process's output while it runs.
const OutputInterval = 200 * time.Millisecond

// Request is one message from the client.
type Request struct {
	ID      uint64     `json:"id"`
	Op      string     `json:"op"`
	Proc    uint64     `json:"proc,omitempty"`
	Version int        `json:"version,omitempty"` // hello
	Start   *StartArgs `json:"start,omitempty"`
	Max     int        `json:"max,omitempty"`   // peek
	Owner   string     `json:"owner,omitempty"` // end-owner
	Input   *InputArgs `json:"input,omitempty"` // input
}

// InputArgs are what Input types into a terminal (shell.Terminal.Input).
type InputArgs struct {
	Text string        `json:"text,omitempty"`
	Keys []string      `json:"keys,omitempty"`
	Wait time.Duration `json:"wait,omitempty"`
}

// StartArgs are a Spec to launch (foreground, its timeout applies) or to
// start in the background.
type StartArgs struct {
	Background     bool              `json:"background,omitempty"`
	Command        string            `json:"command"`
	Workdir        string            `json:"workdir,omitempty"` // "" or relative: against the agent's cwd
	Timeout        time.Duration     `json:"timeout,omitempty"`
	StdoutMaxBytes int               `json:"stdoutMaxBytes,omitempty"`
	HasStdin       bool              `json:"hasStdin,omitempty"` // Stdin given (possibly empty); else /dev/null
	Stdin          []byte            `json:"stdin,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	ManagedEnv     map[string]string `json:"managedEnv,omitempty"`
	Owner          string            `json:"owner,omitempty"` // the Request's Owner, for end-owner
}

// Response is one message from the agent: the answer to a Request (ID of
// the Request) or a notification (ID 0, Op set).
type Response struct {
	ID      uint64   `json:"id,omitempty"`
	Op      string   `json:"op,omitempty"`
	Proc    uint64   `json:"proc,omitempty"`
	Err     *Error   `json:"err,omitempty"`
	Hello   *Hello   `json:"hello,omitempty"`
	Read    *Read    `json:"read,omitempty"`
	Killed  bool     `json:"killed,omitempty"`
	Written [2]int64 `json:"written,omitzero"`
	Done    *Done    `json:"done,omitempty"`
	Raw     *Output  `json:"raw,omitempty"`   // raw
	Count   int      `json:"count,omitempty"` // leftovers
}

// Hello is what the agent tells about itself.
type Hello struct {
	Version int    `json:"version"`
	Conch   string `json:"conch"` // the agent binary's version
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Cwd     string `json:"cwd"` // where commands without a workdir run
	// Enforces is what the agent holds commands to, as conch's start-up
	// line says it ("…; containment: pid-namespace; sandbox:
	// workspace-write, network on"); added within version 1.
	Enforces string `json:"enforces,omitempty"`
}

// Error kinds: they map back to the seam's typed errors.
const (
	ErrKindRequest = "request" // *shell.RequestError
	ErrKindWorkdir = "workdir" // *shell.WorkdirError
	ErrKindSpawn   = "spawn"   // *shell.SpawnError
	ErrKindClosed  = "closed"  // shell.ErrClosed
	ErrKindVersion = "version" // the agent does not speak the client's version
	ErrKindProc    = "proc"    // no such process (released, or never started)
	// ErrKindUnsupported: the agent cannot do that (its executor has no
	// terminals); errors.ErrUnsupported.
	ErrKindUnsupported = "unsupported"
	// ErrKindStart: the agent could not start (Refuse): its hello's
	// answer, and then it exits with status RefusedStatus.
	ErrKindStart = "start"
	ErrKindOther = "other"
)

// Error is a failure carried in a Response.
type Error struct {
	Kind  string `json:"kind"`
	Field string `json:"field,omitempty"` // request: the field
	Path  string `json:"path,omitempty"`  // workdir: the path
	Errno int    `json:"errno,omitempty"` // workdir, spawn: the system error number, when there is one
	Msg   string `json:"msg"`
}

// Output is a shell.Output on the wire.
type Output struct {
	Text      string    `json:"text,omitempty"`
	Truncated bool      `json:"truncated,omitempty"`
	SpillPath string    `json:"spillPath,omitempty"`
	Head      string    `json:"head,omitempty"`
	Size      int64     `json:"size,omitempty"`
	Lines     int64     `json:"lines,omitempty"`
	SpillErr  *SpillErr `json:"spillErr,omitempty"`
	Binary    bool      `json:"binary,omitempty"` // added within version 1
}

// SpillErr is why a truncated stream has no spill file: Cap > 0 for a
// *shell.SpillCapError, else Msg.
type SpillErr struct {
	Cap int64  `json:"cap,omitempty"`
	Msg string `json:"msg,omitempty"`
}

// Read is a shell.ReadResult on the wire.
type Read struct {
	Stdout         string         `json:"stdout,omitempty"`
	Stderr         string         `json:"stderr,omitempty"`
	Lossy          bool           `json:"lossy,omitempty"`
	StdoutSpill    string         `json:"stdoutSpill,omitempty"`
	StderrSpill    string         `json:"stderrSpill,omitempty"`
	StdoutSkipped  shell.Omission `json:"stdoutSkipped,omitzero"`
	StderrSkipped  shell.Omission `json:"stderrSkipped,omitzero"`
	StdoutSpillErr *SpillErr      `json:"stdoutSpillErr,omitempty"`
	StderrSpillErr *SpillErr      `json:"stderrSpillErr,omitempty"`
	StdoutBinary   bool           `json:"stdoutBinary,omitempty"` // added within version 1
	StderrBinary   bool           `json:"stderrBinary,omitempty"`
}

// Done is a settled process: its status and its Result.
type Done struct {
	Status      shell.Status  `json:"status"`
	ExitCode    *int          `json:"exitCode,omitempty"`
	Signal      string        `json:"signal,omitempty"`
	TimedOut    bool          `json:"timedOut,omitempty"`
	Aborted     bool          `json:"aborted,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	Stdout      Output        `json:"stdout"`
	Stderr      Output        `json:"stderr"`
	LeftRunning bool          `json:"leftRunning,omitempty"`
	// Notes and Sandbox were added within version 1 (an older agent
	// sends neither: its commands ran without a sandbox).
	Notes   []string             `json:"notes,omitempty"`
	Sandbox *shell.SandboxReport `json:"sandbox,omitempty"`
}

// ErrFrameTooLarge is returned for a frame longer than MaxFrame.
var ErrFrameTooLarge = fmt.Errorf("agent: %w", frame.ErrTooLarge)

// Conn reads and writes frames (internal/frame); writes are safe for
// concurrent use, reads are not.
type Conn struct {
	r   *frame.Reader
	wmu sync.Mutex
	w   io.Writer
}

// NewConn returns a Conn reading frames from r and writing them to w.
func NewConn(r io.Reader, w io.Writer) *Conn { return &Conn{r: frame.NewReader(r, MaxFrame), w: w} }

// Write sends v as one frame.
func (c *Conn) Write(v any) error {
	b, err := frame.Encode(v, MaxFrame)
	if errors.Is(err, frame.ErrTooLarge) {
		return ErrFrameTooLarge
	}
	if err != nil {
		return fmt.Errorf("agent: encode frame: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.Write(b); err != nil {
		return fmt.Errorf("agent: write frame: %w", err)
	}
	return nil
}

// Read receives one frame into v. It returns io.EOF when the stream ended
// cleanly between frames.
func (c *Conn) Read(v any) error {
	switch err := c.r.Read(v); {
	case err == nil, err == io.EOF:
		return err
	case errors.Is(err, frame.ErrTooLarge):
		return ErrFrameTooLarge
	default:
		return fmt.Errorf("agent: read frame: %w", err)
	}
}

// EncodeError turns an error of the seam into its wire form.
func EncodeError(err error) *Error {
	var (
		re *shell.RequestError
		we *shell.WorkdirError
		se *shell.SpawnError
	)
	switch {
	case errors.As(err, &re):
		return &Error{Kind: ErrKindRequest, Field: re.Field, Msg: re.Reason}
	case errors.As(err, &we):
		return &Error{Kind: ErrKindWorkdir, Path: we.Path, Errno: errno(we.Err), Msg: we.Err.Error()}
	case errors.As(err, &se):
		return &Error{Kind: ErrKindSpawn, Errno: errno(se.Err), Msg: se.Err.Error()}
	case errors.Is(err, shell.ErrClosed):
		return &Error{Kind: ErrKindClosed, Msg: err.Error()}
	}
	return &Error{Kind: ErrKindOther, Msg: err.Error()}
}

func errno(err error) int {
	var n syscall.Errno
	if errors.As(err, &n) {
		return int(n)
	}
	return 0
}

// Err turns e back into an error of the seam, so that callers test it
// with errors.Is and errors.As as they would a local one.
func (e *Error) Err() error {
	cause := errors.New(e.Msg)
	if e.Errno != 0 {
		cause = syscall.Errno(e.Errno)
	}
	switch e.Kind {
	case ErrKindRequest:
		return &shell.RequestError{Field: e.Field, Reason: e.Msg}
	case ErrKindWorkdir:
		return &shell.WorkdirError{Path: e.Path, Err: cause}
	case ErrKindSpawn:
		return &shell.SpawnError{Err: cause}
	case ErrKindClosed:
		return shell.ErrClosed
	case ErrKindUnsupported:
		return fmt.Errorf("agent: %s: %w", e.Msg, errors.ErrUnsupported)
	}
	return fmt.Errorf("agent: %s", e.Msg)
}

func encodeSpillErr(err error) *SpillErr {
	if err == nil {
		return nil
	}
	var ce *shell.SpillCapError
	if errors.As(err, &ce) {
		return &SpillErr{Cap: ce.Cap}
	}
	return &SpillErr{Msg: err.Error()}
}

// Err is the error s stands for (nil for nil).
func (s *SpillErr) Err() error {
	switch {
	case s == nil:
		return nil
	case s.Cap > 0:
		return &shell.SpillCapError{Cap: s.Cap}
	}
	return errors.New(s.Msg)
}

// EncodeOutput is o on the wire.
func EncodeOutput(o shell.Output) Output {
	return Output{Text: o.Text, Truncated: o.Truncated, SpillPath: o.SpillPath, Head: o.Head,
		Size: o.Size, Lines: o.Lines, SpillErr: encodeSpillErr(o.SpillErr), Binary: o.Binary}
}

// Output is o back as a shell.Output.
func (o Output) Output() shell.Output {
	return shell.Output{Text: o.Text, Truncated: o.Truncated, SpillPath: o.SpillPath, Head: o.Head,
		Size: o.Size, Lines: o.Lines, SpillErr: o.SpillErr.Err(), Binary: o.Binary}
}

// EncodeRead is r on the wire.
func EncodeRead(r shell.ReadResult) *Read {
	return &Read{Stdout: r.Stdout, Stderr: r.Stderr, Lossy: r.Lossy,
		StdoutSpill: r.StdoutSpill, StderrSpill: r.StderrSpill,
		StdoutSkipped: r.StdoutSkipped, StderrSkipped: r.StderrSkipped,
		StdoutSpillErr: encodeSpillErr(r.StdoutSpillErr), StderrSpillErr: encodeSpillErr(r.StderrSpillErr),
		StdoutBinary: r.StdoutBinary, StderrBinary: r.StderrBinary}
}

// ReadResult is r back as a shell.ReadResult; a nil r is an empty read.
func (r *Read) ReadResult() shell.ReadResult {
	if r == nil {
		return shell.ReadResult{}
	}
	return shell.ReadResult{Stdout: r.Stdout, Stderr: r.Stderr, Lossy: r.Lossy,
		StdoutSpill: r.StdoutSpill, StderrSpill: r.StderrSpill,
		StdoutSkipped: r.StdoutSkipped, StderrSkipped: r.StderrSkipped,
		StdoutSpillErr: r.StdoutSpillErr.Err(), StderrSpillErr: r.StderrSpillErr.Err(),
		StdoutBinary: r.StdoutBinary, StderrBinary: r.StderrBinary}
}

// EncodeDone is a settled p on the wire.
func EncodeDone(p shell.Process) *Done {
	res := p.Result()
	return &Done{Status: p.Status(), ExitCode: res.ExitCode, Signal: res.Signal,
		TimedOut: res.TimedOut, Aborted: res.Aborted, Timeout: res.Timeout,
		Stdout: EncodeOutput(res.Stdout), Stderr: EncodeOutput(res.Stderr), LeftRunning: res.LeftRunning,
		Notes: res.Notes, Sandbox: res.Sandbox}
}

// Result is d as a shell.Result.
func (d *Done) Result() shell.Result {
	return shell.Result{ExitCode: d.ExitCode, Signal: d.Signal, TimedOut: d.TimedOut, Aborted: d.Aborted,
		Timeout: d.Timeout, Stdout: d.Stdout.Output(), Stderr: d.Stderr.Output(), LeftRunning: d.LeftRunning,
		Notes: d.Notes, Sandbox: d.Sandbox}
}
