package tools

import (
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// StreamValue is one stream in a structured value: the same text as the
// result's text shows of it.
type StreamValue struct {
	Text string `json:"text"`
	// Truncated reports that Text is not the whole stream: it was cut to
	// fit the result, or the executor kept only part of it.
	Truncated bool   `json:"truncated"`
	SpillPath string `json:"spillPath,omitempty"`
}

// ForegroundValue is the structured value of a foreground bash call.
type ForegroundValue struct {
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
	Kind   string `json:"kind"` // "background"
	TaskID string `json:"taskId"`
}

// YieldedValue is the structured value of a foreground call moved to the
// background after the yield window.
type YieldedValue struct {
	Kind           string `json:"kind"` // "yielded"
	TaskID         string `json:"taskId"`
	YieldedAfterMs int64  `json:"yieldedAfterMs"`
	// TimeoutMs is the command's timeout, which still applies to the task.
	TimeoutMs int64 `json:"timeoutMs"`
	// Stdout and Stderr are the output so far, as the text shows it.
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
	// ElapsedMs is the task's run time: start to end once it ended, else
	// start to now.
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

// TaskOutputValue is the structured value of task_output.
type TaskOutputValue struct {
	TaskID string `json:"taskId"`
	TaskState
	Output string `json:"output"`
	// Sandbox is the sandbox the task's command ran under and what it
	// denied, once the task settled; absent without one.
	Sandbox *shell.SandboxReport `json:"sandbox,omitempty"`
}

// TaskListValue is the structured value of task_list.
type TaskListValue struct {
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
	TaskID string `json:"taskId"`
	TaskState
	AlreadyFinished bool `json:"alreadyFinished"`
	// KilledLeftovers is how many processes a settled task had left
	// running, which the kill ended.
	KilledLeftovers int `json:"killedLeftovers,omitempty"`
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
		Stdout:    StreamValue{Text: shown.out, Truncated: shown.outCut, SpillPath: HostPath(r.Stdout.Host, r.Stdout.SpillPath)},
		Stderr:    StreamValue{Text: shown.err, Truncated: shown.errCut, SpillPath: HostPath(r.Stderr.Host, r.Stderr.SpillPath)},
		Sandbox:   r.Sandbox,
	}
	if r.Signal != "" {
		sig := r.Signal
		v.Signal = &sig
	}
	return v
}
