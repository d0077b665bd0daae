// Package tools holds conch's model-facing tools (bash, task_output,
// task_list, task_kill): their schemas, the validation of a model's
// arguments, the text and structured value a model gets back, and how an
// editor draws each call (PresentCall, PresentResult).
//
// To embed conch without a transport, build an executor (shell/local.New)
// and a task runtime (tasks.New), make the tools over them with New, list
// them for the model with Toolset.Tools, and hand each of the model's
// calls, raw JSON arguments and all, to Toolset.Call (see Example).
package tools

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/rules"
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
	// DefaultWait is how long task_output waits when the model gives no
	// timeout_ms (default 30 s); MaxWait caps any wait (default 600 s).
	// A transport whose clients cut calls off sets MaxWait below that
	// limit: the MCP server sets 50 s, as MCP clients cut calls near
	// 60 s. The task_output description states both.
	DefaultWait, MaxWait time.Duration
	// MaxResultBytes bounds the text of a bash result, its markers and the
	// completion notices that ride with it (default DefaultMaxResultBytes;
	// a value below MinResultBytes is raised to it). Streams that do not
	// fit keep their start and their end, joined by a line saying what was
	// left out. task_output reads are held to it too.
	MaxResultBytes int
	// Rules, if set, decide every bash command line before anything is
	// spawned, in the foreground or the background: deny fails the call,
	// ask asks the user through the call's Approver (CallOptions), allow
	// runs it. Nil runs everything.
	Rules *rules.Rules
	// Projects, if set, lets a project narrow Rules: the deny and ask
	// rules of its file (internal/config's Projects reads
	// `.conch/config.toml` in a session's working directory, for a
	// session without one the executor's default directory) are added to
	// Rules for that session's commands, on every host. A file that is
	// refused or unreadable fails the session's bash calls with an error
	// naming it (a broken file never silently lifts its rules) until it
	// is fixed. The file may also narrow the sandbox of the session's
	// commands on this machine, never widen Sandbox: the narrowing
	// reaches the executor with each command (shell.Request.Narrowing),
	// and one that would widen, or that no sandbox can honour, fails the
	// session's bash calls like a refused file
	// (docs/configuration.md#project-files).
	Projects Projects
	// Sandbox is the sandbox the default executor's commands run in,
	// which a project file may only narrow (Projects). The zero value
	// is conch's default sandbox, workspace-write with the network on.
	Sandbox Sandbox
	// ApprovalTimeout is how long a question to the user stays open
	// (default DefaultApprovalTimeout); the call's cancellation ends it
	// sooner.
	ApprovalTimeout time.Duration
	// Unsandboxed, if set, is the executor that runs commands outside
	// the sandbox with the user's yes (docs/sandbox.md#escalation): bash
	// then offers outside_sandbox and justification, whose call asks the
	// user through the call's Approver before anything runs; and when a
	// foreground command on this machine ended with what its sandbox
	// recorded denying it (shell.Result.Sandbox.Denied), the Approver is
	// asked once whether to run it again here ("Allow once") or in the
	// session's sandbox with a directory granted for the session. What a
	// command run here leaves running is killed when it ends (with
	// shell.Leftovers). Nil asks nothing (escalation "never"; with
	// Sandbox.Enforced, a call with outside_sandbox is told so). The
	// Toolset does not close it; it ends its sessions' leftovers like the
	// executor's.
	Unsandboxed shell.Executor
	// Hosts are the remote hosts a model may run commands on, by name
	// ("local" is this machine and cannot be one of them). With hosts,
	// bash offers a `host` parameter (the names, plus "local", the
	// default); a remote host's tasks are of kind "bash@<name>".
	Hosts []Host
	// BashNotes are sentences the bash description ends with: what the
	// deployment must tell a model about where its commands run (conch
	// adds "Commands run without a file sandbox on this host." where the
	// host cannot enforce the default sandbox, docs/sandbox.md).
	BashNotes []string
	// Scrubbed names the variables the executor removes from commands'
	// environment (local.Executor.Scrubbed): the bash description lists
	// them, names only, and says how the user passes one through.
	Scrubbed []string
	// Recorder, if set, receives the events of every call
	// (docs/operations.md): the call and its end, the rules' decisions,
	// the questions and answers, the grants, each process's start, end
	// and denials, and the kills, each call's as phases of its trace
	// (ops.Start). The call id is the context's (ops.WithCallID), else a
	// new one.
	Recorder ops.Recorder
}

// Host is a remote host of Options.Hosts: its name, as the model sees it,
// and the executor that runs commands there. A command for a host runs in
// the workdir the model gave, resolved by that executor (the session's
// cwd is a path of this machine, so it does not apply there). Cwd is the
// executor's default workdir there ("" for the remote user's home), told
// here only so that an editor can draw where a call runs.
type Host struct {
	Name     string
	Executor shell.Executor
	Cwd      string
}

// HostLocal is the host parameter's name for this machine.
const HostLocal = "local"

// DefaultMaxResultBytes is the default result budget: what Claude Code's
// own Bash tool allows a result.
const DefaultMaxResultBytes = 30000

// MinResultBytes is the smallest result budget: room for both streams'
// cut lines and the markers.
const MinResultBytes = 1000

// Toolset is the four tools over one executor. It is safe for concurrent
// use by many sessions.
type Toolset struct {
	ex       shell.Executor
	opts     Options
	limits   bashLimits
	approved approvals
	deferred noticeQueue
	grants   grants
	hosts    map[string]shell.Executor
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
	if len(t.opts.Hosts) > 0 {
		t.hosts = make(map[string]shell.Executor, len(t.opts.Hosts))
		for _, h := range t.opts.Hosts {
			if h.Name == "" || h.Name == HostLocal || h.Executor == nil || t.hosts[h.Name] != nil {
				panic("tools: bad host " + strconv.Quote(h.Name) + ": empty, \"local\", a repeat, or without an executor")
			}
			t.hosts[h.Name] = h.Executor
		}
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
	if t.opts.ApprovalTimeout <= 0 {
		t.opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	if t.opts.MaxResultBytes == 0 {
		t.opts.MaxResultBytes = DefaultMaxResultBytes
	}
	t.opts.MaxResultBytes = max(t.opts.MaxResultBytes, MinResultBytes)
	t.limits = bashLimits{Budget: t.opts.MaxResultBytes, Background: t.background(), TTY: t.terminals() != nil, Notes: t.opts.BashNotes,
		Scrubbed: t.opts.Scrubbed}
	if t.opts.Sandbox.Enforced {
		sb := t.opts.Sandbox
		t.limits.Sandbox = &sb
	}
	t.limits.Escalation, _ = t.outsideParams()
	if t.yields() {
		t.limits.Yield = t.opts.YieldAfter
	}
	// The executor knows its timeouts: its default fills an empty
	// request, its maximum clamps a huge one.
	def, errDef := ex.Resolve(shell.Request{Command: "true"})
	capped, errMax := ex.Resolve(shell.Request{Command: "true", Timeout: math.MaxInt64})
	if errDef == nil && errMax == nil {
		t.limits.DefaultTimeout, t.limits.MaxTimeout = def.Timeout, capped.Timeout
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
	// LastLine is the last non-blank line the command printed so far
	// (stdout's, else stderr's), cleaned like a result's text and cut to
	// at most MaxProgressLine bytes; "" for task_output waits and before
	// any output.
	LastLine string
}

// MaxProgressLine bounds Progress.LastLine.
const MaxProgressLine = 200

// CallOptions are per-call hooks a transport may set.
type CallOptions struct {
	// Progress, if set, is called while a foreground command runs, and
	// while task_output waits for a task (with the task's run time and
	// output so far), at most once per Options.ProgressEvery.
	Progress func(Progress)
	// KeepAborted makes a foreground call cancelled while its command
	// runs return, once the command is killed, what it had printed and
	// the signal that ended it (Value.Aborted set), instead of the error
	// "tool call aborted": for a transport whose user, not a model,
	// cancels, and who should still see the output. A call cancelled
	// before its command started is still that error.
	KeepAborted bool
	// Approver asks the calling session's user about a command the rules
	// want a yes for; nil means no one can be asked, and such a command
	// is not run.
	Approver Approver
	// Output, if set, receives a foreground bash command's output as it
	// is produced, without taking it from the result: the bytes written
	// since the previous report (final false), at most once per
	// OutputEvery, then exactly once, before the call returns, the rest
	// (final true; data may be empty). The rest ends with the markers a
	// terminal card does not draw as its exit pill (a timeout, a process
	// left holding the output). The reports together are what an editor's
	// terminal card shows: both streams as written, interleaved to within
	// a fifth of OutputEvery, raw (escape sequences kept for the card's
	// terminal), valid UTF-8, at most MaxLiveOutput bytes before the final
	// report, which then starts with a skip line and carries each stream's
	// end. Executors whose processes are not shell.Followers give no
	// reports. It is not called for a call that never started a command.
	Output func(data string, final bool)
	// OutputEvery is the least time between two Output reports (default
	// DefaultOutputEvery).
	OutputEvery time.Duration
}

// Result is what a tool call gives back.
type Result struct {
	// Text is the model-facing text. For an error it starts "Error: ".
	Text string
	// IsError marks a tool error (bad arguments, infrastructure failure,
	// cancellation); a failing command is not one.
	IsError bool
	// Value is the structured value (a JSON object), nil for errors. Its
	// first member, "text", is Text followed by each notice after a blank
	// line; the whole value, JSON-encoded, fits Options.MaxResultBytes.
	Value any
	// Notices are completion notices for the calling session's tasks that
	// finished on their own; a transport delivers them after Text (and
	// Value's text carries them). Notices that did not fit ride on the
	// session's next result.
	Notices []Notice
}

// Tools lists the tools, bash first. The task tools are listed only with
// a task runtime.
func (t *Toolset) Tools() []Tool {
	bash := Tool{
		Name:         NameBash,
		Title:        "Run a bash command",
		Description:  bashDescription(t.limits),
		InputSchema:  bashInputSchema,
		OutputSchema: bashOutputSchema,
		Destructive:  true,
	}
	if !t.background() {
		bash.InputSchema = bashInputSchemaNoBackground
	}
	if t.terminals() != nil {
		bash.InputSchema = withParam(bash.InputSchema, paramTTY, ttyProperty)
	}
	if offered, _ := t.outsideParams(); offered {
		bash.InputSchema = withParam(withParam(bash.InputSchema, paramOutside, outsideProperty), paramJustification, justificationProperty)
	}
	if t.hosts != nil {
		bash.InputSchema = withHostParam(bash.InputSchema, t.hostNames())
	}
	list := []Tool{bash}
	if t.opts.Tasks == nil {
		return list
	}
	list = append(list,
		Tool{Name: NameTaskOutput, Title: "Read a background task's output", Description: taskOutputDescription(t.opts.DefaultWait, t.opts.MaxWait),
			InputSchema: taskOutputInputSchema(t.opts.DefaultWait, t.opts.MaxWait), OutputSchema: taskOutputOutputSchema, ReadOnly: true},
		Tool{Name: NameTaskList, Title: "List background tasks", Description: taskListDescription,
			InputSchema: taskListInputSchema, OutputSchema: taskListOutputSchema, ReadOnly: true},
		Tool{Name: NameTaskKill, Title: "Kill a background task", Description: taskKillDescription,
			InputSchema: taskKillInputSchema, OutputSchema: taskKillOutputSchema, Destructive: true},
	)
	if t.terminals() != nil {
		list = append(list, Tool{Name: NameTaskInput, Title: "Type into a terminal task", Description: taskInputDescription,
			InputSchema: taskInputInputSchema, OutputSchema: taskOutputOutputSchema, Destructive: true})
	}
	return list
}

// background reports whether run_in_background is offered. It is offered
// unless disabled, even without a runtime, so that a deployment's schema
// does not depend on its wiring; a call then gets a clear error.
func (t *Toolset) background() bool { return !t.opts.DisableBackground }

// yields reports whether a long foreground call moves to a task: it needs
// a window, a runtime, and background execution.
func (t *Toolset) yields() bool {
	return t.opts.YieldAfter > 0 && t.opts.Tasks != nil && t.background()
}

// Prompt is the system-prompt section for hosts that build one.
func (t *Toolset) Prompt() string {
	if t.opts.Tasks == nil {
		return bashPrompt
	}
	if t.terminals() != nil {
		return bashPrompt + "\n" + tasksPrompt + "\n" + ttyPrompt
	}
	return bashPrompt + "\n" + tasksPrompt
}

// Call runs tool name for sess with the model's raw JSON arguments. It
// never returns a Go error: every failure is a Result with IsError. The
// calling session's pending completion notices ride along.
//
// The arguments are decoded once, here, and what was decoded goes down
// the call's path (the record of the call, the checks, the tool).
func (t *Toolset) Call(ctx context.Context, sess Session, name string, args json.RawMessage, o *CallOptions) Result {
	a := parseArgs(args)
	if t.opts.Recorder != nil {
		return t.traced(ctx, sess, name, a, func(ctx context.Context) Result { return t.call(ctx, sess, name, args, a, o) })
	}
	return t.call(ctx, sess, name, args, a, o)
}

// call is Call with args decoded (a).
func (t *Toolset) call(ctx context.Context, sess Session, name string, args json.RawMessage, a rawArgs, o *CallOptions) Result {
	var co CallOptions
	if o != nil {
		co = *o
	}
	if err := checkTaskKeys(name, args, a); err != nil {
		return t.deliver(sess.ID, errorResult(err.Error()), nil, t.Notices(sess.ID))
	}
	var r Result
	var render func(budget int) Result
	// A list is drawn after the notices are taken, so that it never shows
	// running a task whose notice rides on the same result.
	var notices []Notice
	drained := name == NameTaskList
	if drained {
		notices = t.Notices(sess.ID)
	}
	switch name {
	case NameBash:
		r, render = t.bash(ctx, sess, args, a, co)
	case NameTaskOutput:
		r = t.taskOutput(ctx, sess, a, co)
	case NameTaskList:
		r = t.taskList(sess)
	case NameTaskKill:
		r = t.taskKill(ctx, sess, a)
	case NameTaskInput:
		r = t.taskInput(ctx, sess, a)
	default:
		r = errorResult("unknown tool " + name)
	}
	// The notices are drained before a bash result is rendered, so that
	// they and the text share the budget.
	if !drained {
		notices = t.Notices(sess.ID)
	}
	return t.deliver(sess.ID, r, render, notices)
}

// checkTaskKeys refuses a task tool's call with a key the tool does not
// take, before anything else about it is checked. (bash checks its own in
// bash: its parameters depend on the deployment.) a is args decoded.
func checkTaskKeys(name string, args json.RawMessage, a rawArgs) error {
	switch name {
	case NameTaskOutput:
		return checkKeys(name, args, a, taskOutputParams())
	case NameTaskList:
		return checkKeys(name, args, a, taskListParams())
	case NameTaskKill:
		return checkKeys(name, args, a, taskKillParams())
	case NameTaskInput:
		return checkKeys(name, args, a, taskInputParams())
	}
	return nil
}

// EndSession ends the session id: what its user allowed for the session
// is forgotten, its background tasks are disposed of (cancelled, awaited
// and forgotten), and then, on this machine and on every remote host
// whose executor is a shell.OwnerEnder, everything the session's commands
// left running is killed. It returns once all of it is gone.
func (t *Toolset) EndSession(id string) {
	t.approved.forget(id)
	t.deferred.take(id)
	t.grants.forget(id)
	if t.opts.Tasks != nil {
		t.killed(id, "session_end")
		t.opts.Tasks.Dispose(id)
	}
	var wg sync.WaitGroup
	exs := append([]shell.Executor{t.ex}, slices.Collect(maps.Values(t.hosts))...)
	if t.opts.Unsandboxed != nil {
		exs = append(exs, t.opts.Unsandboxed)
	}
	for _, ex := range exs {
		if oe, ok := ex.(shell.OwnerEnder); ok {
			// Hosts in parallel: each may wait a grace period.
			wg.Go(func() { oe.EndOwner(id) })
		}
	}
	wg.Wait()
}

// HostCwds are the configured cwds of the remote hosts that have one, by
// name (nil without such hosts).
func (t *Toolset) HostCwds() map[string]string {
	var m map[string]string
	for _, h := range t.opts.Hosts {
		if h.Cwd != "" {
			if m == nil {
				m = make(map[string]string)
			}
			m[h.Name] = h.Cwd
		}
	}
	return m
}

// Notices drains and words the completion notices pending for a session:
// first those that waited for room in an earlier result (or were given
// back with Requeue), then new ones.
func (t *Toolset) Notices(session string) []Notice {
	if t.opts.Tasks == nil {
		return nil
	}
	out := t.deferred.take(session)
	for _, n := range t.opts.Tasks.Notices(session) {
		out = append(out, Notice{TaskID: n.ID, Text: renderNotice(n), Task: n})
	}
	return out
}

func errorResult(msg string) Result {
	return Result{Text: "Error: " + msg, IsError: true}
}
