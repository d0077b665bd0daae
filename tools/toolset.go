// Package tools holds conch's model-facing tools (bash, task_output,
// task_list, task_kill): their schemas, the validation of a model's
// arguments, the text and structured value a model gets back, and how an
// editor draws each call (PresentCall, PresentResult).
package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// Options configure a Toolset. The zero value is usable.
type Options struct {
	// Tasks is the background task runtime. Without it, background calls
	// fail with "background tasks unavailable: no task runtime is
	// configured" and the task tools are not listed.
	Tasks *tasks.Runtime
	// DisableBackground removes run_in_background from the bash schema
	// and refuses it.
	DisableBackground bool
	// Home is the value of CONCH_HOME in every command's environment
	// (default StateDir()).
	Home string
	// YieldAfter moves a foreground call still running after this long
	// into a background task and returns what it printed so far. 0 turns
	// it off. It needs Tasks, and is off with DisableBackground: a
	// deployment that offers no background execution gets none by the
	// back door.
	YieldAfter time.Duration
	// ProgressEvery is the least time between two progress reports of one
	// call (default 1 s).
	ProgressEvery time.Duration
	// DefaultWait and MaxWait bound task_output's wait (defaults 30 s and
	// 600 s).
	DefaultWait, MaxWait time.Duration
}

// Toolset is the four tools over one executor. It is safe for concurrent
// use by many sessions.
type Toolset struct {
	ex   shell.Executor
	opts Options
}

// New returns the tools over ex. A nil opts means the defaults.
func New(ex shell.Executor, opts *Options) *Toolset {
	if ex == nil {
		panic("tools: nil executor")
	}
	t := &Toolset{ex: ex}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.Home == "" {
		t.opts.Home = StateDir()
	}
	if t.opts.ProgressEvery <= 0 {
		t.opts.ProgressEvery = time.Second
	}
	if t.opts.DefaultWait <= 0 {
		t.opts.DefaultWait = 30 * time.Second
	}
	if t.opts.MaxWait <= 0 {
		t.opts.MaxWait = 600 * time.Second
	}
	return t
}

// StateDir is conch's state directory: $XDG_STATE_HOME/conch, else
// ~/.local/state/conch. A relative XDG_STATE_HOME is ignored, as the XDG
// base directory specification says.
func StateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "conch")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "conch-state")
	}
	return filepath.Join(home, ".local", "state", "conch")
}

// Executor returns the executor the tools run commands with.
func (t *Toolset) Executor() shell.Executor { return t.ex }

// Tasks returns the task runtime, or nil.
func (t *Toolset) Tasks() *tasks.Runtime { return t.opts.Tasks }

// Session is the caller of a tool: its id owns its background tasks, and
// its working directory is where its commands run by default.
type Session struct {
	// ID identifies the session; it is CONCH_SESSION_ID in every command.
	ID string
	// Cwd is the session's working directory (a real, absolute path); ""
	// means the executor's default.
	Cwd string
}

// Progress is a report on a foreground call that is still running.
type Progress struct {
	Elapsed time.Duration
	Bytes   int64 // stdout and stderr so far
}

// CallOptions are per-call hooks a transport may set.
type CallOptions struct {
	// Progress, if set, is called while a foreground command runs, at
	// most once per Options.ProgressEvery.
	Progress func(Progress)
}

// Result is what a tool call gives back.
type Result struct {
	// Text is the model-facing text. For an error it starts "Error: ".
	Text string
	// IsError marks a tool error (bad arguments, infrastructure failure,
	// cancellation); a failing command is not one.
	IsError bool
	// Value is the structured value (a JSON object), nil for errors.
	Value any
	// Notices are completion notices for the calling session's tasks that
	// finished on their own; a transport delivers them after Text.
	Notices []string
}

// Tools lists the tools, bash first. The task tools are listed only with
// a task runtime.
func (t *Toolset) Tools() []Tool {
	bash := Tool{
		Name:         NameBash,
		Title:        "Run a bash command",
		Description:  bashDescriptionCore + bashDescriptionBackground,
		InputSchema:  bashInputSchema,
		OutputSchema: bashOutputSchema,
		Destructive:  true,
	}
	if !t.background() {
		bash.Description = bashDescriptionCore + bashDescriptionNoBackground
		bash.InputSchema = bashInputSchemaNoBackground
	}
	list := []Tool{bash}
	if t.opts.Tasks == nil {
		return list
	}
	return append(list,
		Tool{Name: NameTaskOutput, Title: "Read a background task's output", Description: taskOutputDescription,
			InputSchema: taskOutputInputSchema, OutputSchema: taskOutputOutputSchema, ReadOnly: true},
		Tool{Name: NameTaskList, Title: "List background tasks", Description: taskListDescription,
			InputSchema: taskListInputSchema, OutputSchema: taskListOutputSchema, ReadOnly: true},
		Tool{Name: NameTaskKill, Title: "Kill a background task", Description: taskKillDescription,
			InputSchema: taskKillInputSchema, OutputSchema: taskKillOutputSchema, Destructive: true},
	)
}

// background reports whether run_in_background is offered. It is offered
// unless disabled, even without a runtime, so that a deployment's schema
// does not depend on its wiring; a call then gets a clear error.
func (t *Toolset) background() bool { return !t.opts.DisableBackground }

// Prompt is the system-prompt section for hosts that build one.
func (t *Toolset) Prompt() string {
	if t.opts.Tasks == nil {
		return BashPrompt
	}
	return BashPrompt + "\n" + TasksPrompt
}

// Call runs tool name for sess with the model's raw JSON arguments. It
// never returns a Go error: every failure is a Result with IsError. The
// calling session's pending completion notices ride along.
func (t *Toolset) Call(ctx context.Context, sess Session, name string, args json.RawMessage, o *CallOptions) Result {
	var co CallOptions
	if o != nil {
		co = *o
	}
	var r Result
	switch name {
	case NameBash:
		r = t.bash(ctx, sess, args, co)
	case NameTaskOutput:
		r = t.taskOutput(ctx, sess, args)
	case NameTaskList:
		r = t.taskList(sess)
	case NameTaskKill:
		r = t.taskKill(sess, args)
	default:
		r = errorResult("unknown tool " + name)
	}
	r.Notices = t.Notices(sess.ID)
	return r
}

// EndSession ends the session id: its background tasks are disposed of
// (cancelled, awaited and forgotten), and then, when the executor is a
// shell.OwnerEnder, everything the session's commands left running is
// killed. It returns once all of it is gone.
func (t *Toolset) EndSession(id string) {
	if t.opts.Tasks != nil {
		t.opts.Tasks.Dispose(id)
	}
	if oe, ok := t.ex.(shell.OwnerEnder); ok {
		oe.EndOwner(id)
	}
}

// Notices drains the completion notices pending for a session.
func (t *Toolset) Notices(session string) []string {
	if t.opts.Tasks == nil {
		return nil
	}
	return t.opts.Tasks.Notices(session)
}

func errorResult(msg string) Result {
	return Result{Text: "Error: " + msg, IsError: true}
}
