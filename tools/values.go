package tools

import (
	"strings"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// Every structured value starts with Text: the whole model-facing text of
// its result, the completion notices that ride with it included (each
// after a blank line). Claude Code and Codex hand a model only the
// structured value, JSON-encoded, when a result has one; other clients
// show the text blocks. Either way the model reads the same words, and
// the result budget holds for the value as it is sent (docs/tools.md,
// "One result for every host"). The facts that follow Text are for
// programs; the streams' texts are not repeated there.

// StreamValue is one stream in a structured value: whether the result's
// text shows all of it, where the whole of it is, and its size.
type StreamValue struct {
	// Text is the stream as the result's text shows it, for Go callers.
	// It is not part of the JSON value: Text of the enclosing value
	// carries it once.
	Text string `json:"-"`
	// Truncated reports that the text does not show the whole stream: it
	// was cut to fit the result, or the executor kept only part of it.
	Truncated bool   `json:"truncated"`
	SpillPath string `json:"spillPath,omitempty"`
	// Bytes and Lines count the whole stream (bytes, newline bytes), shown
	// or not; for the output so far of a yielded call, what it printed
	// before it moved.
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
}

// ForegroundValue is the structured value of a foreground bash call.
type ForegroundValue struct {
	Text      string      `json:"text"`
	Kind      string      `json:"kind"` // "foreground"
	ExitCode  *int        `json:"exitCode"`
	Signal    *string     `json:"signal"`
	TimedOut  bool        `json:"timedOut"`
	Aborted   bool        `json:"aborted"`
	TimeoutMs int64       `json:"timeoutMs"`
	Stdout    StreamValue `json:"stdout"`
	Stderr    StreamValue `json:"stderr"`
	// Sandbox is the sandbox the command ran under and what it denied;
	// absent without one.
	Sandbox *shell.SandboxReport `json:"sandbox,omitempty"`
}

// BackgroundValue is the structured value of a background start.
type BackgroundValue struct {
	Text   string `json:"text"`
	Kind   string `json:"kind"` // "background"
	TaskID string `json:"taskId"`
}

// YieldedValue is the structured value of a foreground call moved to the
// background after the yield window, or, for a tty call, once it waited
// for input.
type YieldedValue struct {
	Text           string `json:"text"`
	Kind           string `json:"kind"` // "yielded"
	TaskID         string `json:"taskId"`
	YieldedAfterMs int64  `json:"yieldedAfterMs"`
	// TimeoutMs is the command's timeout, counted from its start, which
	// still applies to the task.
	TimeoutMs int64 `json:"timeoutMs"`
	// Stdout and Stderr are the output so far, as the text shows it (a
	// tty call's screen is its stdout).
	Stdout StreamValue `json:"stdout"`
	Stderr StreamValue `json:"stderr"`
}

// TaskState is a task's status and its facts, as the task tools' values
// carry them. Detail is the text after the status in the status line
// ("exit code: 1", "timed out after 800ms, signal: SIGTERM"); the other
// fields give the same facts one by one.
type TaskState struct {
	Status    string `json:"status"`
	Detail    string `json:"detail,omitempty"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timedOut,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
	// ElapsedMs is the task's run time from the command's start (a
	// foreground call's, for a task it moved to): to its end once it
	// ended, else to now.
	ElapsedMs int64 `json:"elapsedMs"`
	// LeftRunning is how many processes a settled task left running.
	LeftRunning int `json:"leftRunning,omitempty"`
}

func taskState(info tasks.Info) TaskState {
	o := info.Outcome
	s := TaskState{
		Status:    string(info.Status),
		Detail:    o.Details(),
		ExitCode:  o.ExitCode,
		Signal:    o.Signal,
		TimedOut:  o.TimedOut,
		ElapsedMs: info.Elapsed.Milliseconds(),
	}
	s.LeftRunning = info.Leftovers
	if o.TimedOut {
		s.TimeoutMs = o.Timeout.Milliseconds()
	}
	return s
}

// TaskOutputValue is the structured value of task_output (and of
// task_input, which answers as task_output does).
type TaskOutputValue struct {
	Text   string `json:"text"`
	TaskID string `json:"taskId"`
	TaskState
	// Output is what the read returned (Text without the status line and
	// the notices), for Go callers; Text carries it in the JSON value.
	Output string `json:"-"`
	// Sandbox is the sandbox the task's command ran under and what it
	// denied, once the task settled; absent without one.
	Sandbox *shell.SandboxReport `json:"sandbox,omitempty"`
}

// TaskListValue is the structured value of task_list.
type TaskListValue struct {
	Text  string      `json:"text"`
	Tasks []TaskEntry `json:"tasks"`
}

// TaskEntry is one task in TaskListValue.
type TaskEntry struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	TaskState
	Label string `json:"label"`
}

// TaskKillValue is the structured value of task_kill.
type TaskKillValue struct {
	Text   string `json:"text"`
	TaskID string `json:"taskId"`
	TaskState
	AlreadyFinished bool `json:"alreadyFinished"`
	// KilledLeftovers is how many processes a settled task had left
	// running, which the kill ended.
	KilledLeftovers int `json:"killedLeftovers,omitempty"`
}

// texted is a structured value whose Text a result sets last, once the
// notices that ride with it are known.
type texted interface {
	withText(text string) any
}

func (v ForegroundValue) withText(s string) any { v.Text = s; return v }
func (v BackgroundValue) withText(s string) any { v.Text = s; return v }
func (v YieldedValue) withText(s string) any    { v.Text = s; return v }
func (v TaskOutputValue) withText(s string) any { v.Text = s; return v }
func (v TaskListValue) withText(s string) any   { v.Text = s; return v }
func (v TaskKillValue) withText(s string) any   { v.Text = s; return v }

// withNotices is a result's whole model-facing text: text, then each
// notice after a blank line.
func withNotices(text string, notices []Notice) string {
	if len(notices) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	for _, n := range notices {
		b.WriteString(noticeSep(b.String()))
		b.WriteString(n.Text)
	}
	return b.String()
}

// noticeSep is what goes between a text and the notice after it: a blank
// line (one newline when the text already ends with one).
func noticeSep(text string) string {
	if strings.HasSuffix(text, "\n") {
		return "\n"
	}
	return "\n\n"
}

// streamValue is a shown stream's facts in a structured value.
func streamValue(text string, cut bool, spill string, size, lines int64) StreamValue {
	return StreamValue{Text: text, Truncated: cut, SpillPath: spill, Bytes: size, Lines: lines}
}

// foregroundValue is r's structured value; its streams are the texts
// shown (shown), not the executor's longer tails.
func foregroundValue(r shell.Result, shown shownStreams) ForegroundValue {
	v := ForegroundValue{
		Kind:      "foreground",
		ExitCode:  r.ExitCode,
		TimedOut:  r.TimedOut,
		Aborted:   r.Aborted,
		TimeoutMs: r.Timeout.Milliseconds(),
		Stdout:    streamValue(shown.out, shown.outCut, HostPath(r.Stdout.Host, r.Stdout.SpillPath), shown.outSize, shown.outLines),
		Stderr:    streamValue(shown.err, shown.errCut, HostPath(r.Stderr.Host, r.Stderr.SpillPath), shown.errSize, shown.errLines),
		Sandbox:   r.Sandbox,
	}
	if r.Signal != "" {
		sig := r.Signal
		v.Signal = &sig
	}
	return v
}
