package tools

import "github.com/conch-dev/conch/shell"

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

// TaskOutputValue is the structured value of task_output.
type TaskOutputValue struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	Output string `json:"output"`
}

// TaskListValue is the structured value of task_list.
type TaskListValue struct {
	Tasks []TaskEntry `json:"tasks"`
}

// TaskEntry is one task in TaskListValue.
type TaskEntry struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	Label  string `json:"label"`
}

// TaskKillValue is the structured value of task_kill.
type TaskKillValue struct {
	TaskID          string `json:"taskId"`
	Status          string `json:"status"`
	Detail          string `json:"detail,omitempty"`
	AlreadyFinished bool   `json:"alreadyFinished"`
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
		Stdout:    StreamValue{Text: shown.out, Truncated: shown.outCut, SpillPath: r.Stdout.SpillPath},
		Stderr:    StreamValue{Text: shown.err, Truncated: shown.errCut, SpillPath: r.Stderr.SpillPath},
	}
	if r.Signal != "" {
		sig := r.Signal
		v.Signal = &sig
	}
	return v
}
