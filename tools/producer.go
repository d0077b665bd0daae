package tools

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// kindBash is the task kind of background bash commands.
const kindBash = "bash"

// processHandle adapts a background shell.Process into a task.
type processHandle struct {
	p      shell.Process
	budget int
	// began is when the command started, for one that ran in the
	// foreground first (tasks.Begun); zero for a task from the start.
	began time.Time
	// endShown is set once a read after the command ended has shown the
	// markers that follow its last output, so that they are shown once.
	endShown atomic.Bool
	// events records the command's end as its task's (nil: no recorder).
	events *taskEvents
}

var (
	_ tasks.Handle    = (*processHandle)(nil)
	_ tasks.Leftovers = (*processHandle)(nil)
)

// Began is when the command started (tasks.Begun).
func (h *processHandle) Began() time.Time { return h.began }

// newProcessHandle makes p a task the runtime can own; each read's text
// is held to budget bytes (see renderRead), its end markers aside.
func newProcessHandle(p shell.Process, budget int) *processHandle {
	return &processHandle{p: p, budget: budget}
}

// Read returns the output since the previous read, within the handle's
// budget. The read that follows the command's last output ends with the
// markers a foreground result shows before its exit marker: the
// provider's notes (a sandbox's denials, docs/sandbox.md), then
// "[timed out after <ms>ms]" for a command that kept its timeout (a
// yielded foreground call) and was ended by it.
func (h *processHandle) Read() string {
	ended := ended(h.p) // before the read: once ended, it gets all the rest
	r := binaryRead(h.p.Read(), h.p)
	if !ended || h.endShown.Swap(true) {
		return renderRead(r, h.budget)
	}
	res := h.p.Result()
	// The drain of a task is not cut, whatever its leftovers hold: the
	// foreground's marker for that does not apply.
	res.LeftRunning = false
	markers := cardMarkers(res)
	text := readShown(r, h.budget, markers...).body()
	if len(markers) == 0 {
		return text
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + strings.Join(markers, "\n")
}

// Sandbox is the sandbox the command ran under and what it denied, once
// it ended; nil before, or when it ran without one.
func (h *processHandle) Sandbox() *shell.SandboxReport {
	if !ended(h.p) {
		return nil
	}
	return h.p.Result().Sandbox
}

// Peek renders the end of the unread output like Read, without consuming
// it: shell.Process.Peek of each stream, joined as a read joins them.
func (h *processHandle) Peek(maxBytes int) string {
	r := h.p.Peek(maxBytes)
	if ended(h.p) {
		// A binary stream's end is no use in a notice either.
		done := h.p.Result()
		r.StdoutBinary, r.StderrBinary = done.Stdout.Binary, done.Stderr.Binary
		r.StdoutSpill, r.StderrSpill = done.Stdout.SpillPath, done.Stderr.SpillPath
		r.StdoutSpillErr, r.StderrSpillErr = done.Stdout.SpillErr, done.Stderr.SpillErr
		r.Host = done.Stdout.Host
		r = binaryRead(r, h.p)
	}
	return renderRead(shell.ReadResult{Stdout: r.Stdout, Stderr: r.Stderr}, h.budget)
}

// Written is the bytes both streams have produced so far.
func (h *processHandle) Written() int64 {
	o, e := h.p.Written()
	return o + e
}

// Leftovers counts what the command left running, when its provider can
// tell (shell.Leftovers); 0 when it cannot.
func (h *processHandle) Leftovers() int {
	lo, ok := h.p.(shell.Leftovers)
	if !ok {
		return 0
	}
	n, err := lo.Leftovers()
	if err != nil {
		return 0
	}
	return n
}

// KillLeftovers kills what the command left running.
func (h *processHandle) KillLeftovers() error {
	if lo, ok := h.p.(shell.Leftovers); ok {
		return lo.KillLeftovers()
	}
	return nil
}

// Cancel kills the process group (SIGTERM, SIGKILL after the grace).
func (h *processHandle) Cancel(string) { h.p.Kill() }

// Done is closed once the process settled and its output is complete.
func (h *processHandle) Done() <-chan struct{} { return h.p.Done() }

// Outcome maps the process's end to a task outcome.
func (h *processHandle) Outcome() tasks.Outcome {
	if h.events != nil {
		h.events.over(h.p.Result())
	}
	return processOutcome(h.p)
}

// processOutcome is a settled process as a task outcome, fact for fact:
// its status, its exit code (0 for a completed process that reports none),
// the signal that ended it, and whether its own timeout killed it (a
// foreground command moved to the background keeps its timeout). A
// process killed with neither an exit code nor a signal (it never really
// started) says "killed before exit". A non-zero exit is reported, not
// failed.
func processOutcome(p shell.Process) tasks.Outcome {
	res := p.Result()
	out := tasks.Outcome{
		Status:   tasks.StatusCompleted,
		ExitCode: p.ExitCode(),
		Signal:   p.Signal(),
		TimedOut: res.TimedOut,
	}
	if res.TimedOut {
		out.Timeout = res.Timeout
	}
	if p.Status() == shell.StatusKilled {
		out.Status = tasks.StatusKilled
		if out.Signal == "" && out.ExitCode == nil {
			out.Detail = "killed before exit"
		}
		return out
	}
	if out.ExitCode == nil {
		out.ExitCode = new(int)
	}
	return out
}

// renderRead is one incremental read as a model sees it, within budget
// bytes: stdout, then stderr under a "[stderr]" header, each cut like a
// foreground result's streams when they do not fit. A stream some of
// whose unread bytes were dropped from memory starts with the cut line
// that counts them and names its spill file; its tail follows.
func renderRead(r shell.ReadResult, budget int) string {
	return readShown(r, budget).body()
}

// readShown is renderRead's streams, to be followed by markers.
func readShown(r shell.ReadResult, budget int, markers ...string) shownStreams {
	return fitStreams(
		readStream(r.Stdout, r.StdoutSkipped, HostPath(r.Host, r.StdoutSpill), r.StdoutSpillErr),
		readStream(r.Stderr, r.StderrSkipped, HostPath(r.Host, r.StderrSpill), r.StderrSpillErr),
		budget, markers...)
}

// outsideHandle is the task of a command that runs outside the sandbox:
// it settles once the command ended and what it left running was killed
// (docs/sandbox.md#escalation).
type outsideHandle struct {
	*processHandle
	done chan struct{}
}

func newOutsideHandle(h *processHandle) *outsideHandle {
	o := &outsideHandle{processHandle: h, done: make(chan struct{})}
	go func() {
		<-h.p.Done()
		killLeftovers(h.p)
		close(o.done)
	}()
	return o
}

// Done is closed once the command ended and its leftovers are gone.
func (h *outsideHandle) Done() <-chan struct{} { return h.done }
