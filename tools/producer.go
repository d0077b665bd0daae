package tools

import (
	"strconv"
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

// Cancel kills the process group (SIGTERM, SIGKILL after the grace).
func (h ProcessHandle) Cancel(string) { h.p.Kill() }

// Done is closed once the process settled and its output is complete.
func (h ProcessHandle) Done() <-chan struct{} { return h.p.Done() }

// Outcome maps the process's end to a task outcome.
func (h ProcessHandle) Outcome() tasks.Outcome { return ProcessOutcome(h.p) }

// ProcessOutcome is a settled process as a task outcome: killed by a
// signal → "signal: SIG"; killed without one → "killed before exit";
// otherwise completed with its exit code (a non-zero exit is reported, not
// failed).
func ProcessOutcome(p shell.Process) tasks.Outcome {
	if p.Status() == shell.StatusKilled {
		if sig := p.Signal(); sig != "" {
			return tasks.Outcome{Status: tasks.StatusKilled, Detail: "signal: " + sig}
		}
		return tasks.Outcome{Status: tasks.StatusKilled, Detail: "killed before exit"}
	}
	code := 0
	if c := p.ExitCode(); c != nil {
		code = *c
	}
	return tasks.Outcome{Status: tasks.StatusCompleted, Detail: "exit code: " + strconv.Itoa(code)}
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
