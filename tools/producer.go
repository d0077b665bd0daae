package tools

import (
	"strings"
	"sync/atomic"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// kindBash is the task kind of background bash commands.
const kindBash = "bash"

// processHandle adapts a background shell.Process into a task.
type processHandle struct {
	p      shell.Process
	budget int
	// timedOutShown is set once a read has shown the timed-out marker of
	// a yielded command, so that it is shown once, after its last output.
	timedOutShown atomic.Bool
}

var _ tasks.Handle = (*processHandle)(nil)

// newProcessHandle makes p a task the runtime can own; each read's text
// is held to budget bytes (see renderRead), the timed-out marker aside.
func newProcessHandle(p shell.Process, budget int) *processHandle {
	return &processHandle{p: p, budget: budget}
}

// Read returns the output since the previous read, within the handle's
// budget. Once a command that kept its timeout (a yielded foreground
// call) was ended by it, the read that follows its last output ends with
// "[timed out after <ms>ms]", as a foreground result would.
func (h *processHandle) Read() string {
	ended := ended(h.p) // before the read: once ended, it gets all the rest
	text := renderRead(h.p.Read(), h.budget)
	if !ended {
		return text
	}
	res := h.p.Result()
	if !res.TimedOut || h.timedOutShown.Swap(true) {
		return text
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + timedOutMarker(res.Timeout)
}

// Peek renders the end of the unread output like Read, without consuming
// it: shell.Process.Peek of each stream, joined as a read joins them.
func (h *processHandle) Peek(maxBytes int) string {
	r := h.p.Peek(maxBytes)
	return renderRead(shell.ReadResult{Stdout: r.Stdout, Stderr: r.Stderr}, h.budget)
}

// Written is the bytes both streams have produced so far.
func (h *processHandle) Written() int64 {
	o, e := h.p.Written()
	return o + e
}

// Cancel kills the process group (SIGTERM, SIGKILL after the grace).
func (h *processHandle) Cancel(string) { h.p.Kill() }

// Done is closed once the process settled and its output is complete.
func (h *processHandle) Done() <-chan struct{} { return h.p.Done() }

// Outcome maps the process's end to a task outcome.
func (h *processHandle) Outcome() tasks.Outcome { return processOutcome(h.p) }

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
