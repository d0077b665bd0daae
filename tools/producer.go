package tools

import (
	"strings"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// KindBash is the task kind of background bash commands.
const KindBash = "bash"

// ProcessHandle adapts a background shell.Process into a task.
type ProcessHandle struct{ p shell.Process }

var _ tasks.Handle = ProcessHandle{}

// NewProcessHandle makes p a task the runtime can own.
func NewProcessHandle(p shell.Process) ProcessHandle { return ProcessHandle{p: p} }

// Read returns the output since the previous read, with a notice when
// some of it was dropped from memory.
func (h ProcessHandle) Read() string { return RenderRead(h.p.Read()) }

// Peek renders the end of the unread output like Read, without consuming
// it: shell.Process.Peek of each stream, joined as a read joins them.
func (h ProcessHandle) Peek(maxBytes int) string {
	r := h.p.Peek(maxBytes)
	return RenderRead(shell.ReadResult{Stdout: r.Stdout, Stderr: r.Stderr})
}

// Written is the bytes both streams have produced so far.
func (h ProcessHandle) Written() int64 {
	o, e := h.p.Written()
	return o + e
}

// Cancel kills the process group (SIGTERM, SIGKILL after the grace).
func (h ProcessHandle) Cancel(string) { h.p.Kill() }

// Done is closed once the process settled and its output is complete.
func (h ProcessHandle) Done() <-chan struct{} { return h.p.Done() }

// Outcome maps the process's end to a task outcome.
func (h ProcessHandle) Outcome() tasks.Outcome { return ProcessOutcome(h.p) }

// ProcessOutcome is a settled process as a task outcome, fact for fact:
// its status, its exit code (0 for a completed process that reports none),
// the signal that ended it, and whether its own timeout killed it (a
// foreground command moved to the background keeps its timeout). A
// process killed with neither an exit code nor a signal (it never really
// started) says "killed before exit". A non-zero exit is reported, not
// failed.
func ProcessOutcome(p shell.Process) tasks.Outcome {
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

// RenderRead is one incremental read as a model sees it: the delta, then,
// if unread bytes were dropped from memory, where the whole output is.
func RenderRead(r shell.ReadResult) string {
	text := r.Text()
	if !r.Lossy {
		return text
	}
	var spills []string
	for _, p := range []string{r.StdoutSpill, r.StderrSpill} {
		if p != "" {
			spills = append(spills, p)
		}
	}
	where := unavailable
	if len(spills) > 0 {
		where = strings.Join(spills, ", ")
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text + "[some output was dropped from memory; full output: " + where + "]"
}
