package tools

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// This file is where the tools report their work to Options.Recorder
// (docs/operations.md): a call and its end, the rules' decisions, the
// questions and their answers, the grants, each process's start, end and
// denials, and the kills. With no recorder every helper returns after a
// nil comparison.

// record hands e to the recorder, if there is one.
func (t *Toolset) record(ctx context.Context, e ops.Event) {
	if t.opts.Recorder != nil {
		t.opts.Recorder.Record(ctx, e)
	}
}

// start begins phase p on the recorder (ops.Start).
func (t *Toolset) start(ctx context.Context, p ops.Phase) (context.Context, func()) {
	return ops.Start(ctx, t.opts.Recorder, p)
}

// traced runs call as tool call name of sess, as a PhaseCall span with a
// Call event before and a CallEnd event after it. The call id is the
// one in ctx (ops.WithCallID), else a new one.
//
// The arguments the event names are read from a, the call's arguments
// as Call decoded them, leniently: a call whose arguments do not parse
// is still recorded, with what did.
func (t *Toolset) traced(ctx context.Context, sess Session, name string, a rawArgs, call func(context.Context) Result) Result {
	id := ops.CallIDFrom(ctx)
	if id == "" {
		id = ops.NewCallID()
		ctx = ops.WithCallID(ctx, id)
	}
	ctx, end := t.start(ctx, ops.PhaseCall)
	defer end()
	began := time.Now()
	e := ops.Call{Owner: sess.ID, CallID: id, Tool: name}
	e.Task, _ = a.optString("task_id") // what does not parse is left out; the tool reports it
	if name == NameBash {
		e.Command, _ = a.optString("command")
		e.Workdir, _ = a.optString("workdir")
		e.TTY, _ = a.optBool(paramTTY)
		e.Background, _ = a.optBool(paramBackground)
		if host, _ := a.optString("host"); host != HostLocal {
			e.Host = host
		}
	}
	t.record(ctx, e)
	r := call(ctx)
	t.record(ctx, ops.CallEnd{Owner: sess.ID, CallID: id, Tool: name, Result: callResult(r), Duration: time.Since(began)})
	return r
}

// callResult is the CallEnd result of r.
func callResult(r Result) string {
	if r.IsError {
		msg := strings.TrimPrefix(r.Text, "Error: ")
		switch {
		case msg == msgAborted:
			return "cancelled"
		case strings.HasPrefix(msg, "denied by rule "), strings.HasPrefix(msg, "not run: "):
			return "denied"
		}
		return "error"
	}
	switch v := r.Value.(type) {
	case BackgroundValue, *BackgroundValue, YieldedValue, *YieldedValue:
		return "background"
	case ForegroundValue:
		if v.ExitCode == nil || *v.ExitCode != 0 {
			return "error"
		}
	case *ForegroundValue:
		if v.ExitCode == nil || *v.ExitCode != 0 {
			return "error"
		}
	}
	return "ok"
}

// answerOf is the Answer event's choice and answered_by for a, err.
func answerOf(ctx context.Context, a Answer, err error) (choice, by string) {
	switch {
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		return "timeout", "client"
	case err != nil && ctx.Err() != nil: // the call was cancelled: the question withdrawn
		return "cancel", "client"
	case err != nil:
		return "error", "client"
	}
	switch a {
	case AllowOnce:
		return "allow_once", "user"
	case AllowSession:
		return "allow_session", "user"
	case Cancelled:
		return "cancel", "client"
	case Unanswered:
		return "cancel", "client"
	}
	return "deny", "user"
}

// ask puts q to ap within the approval timeout, as a PhaseQuestion span
// with its Question and Answer events of kind kind.
func (t *Toolset) ask(ctx context.Context, sess Session, ap Approver, q Question, kind, subject string) (Answer, error) {
	qctx, end := t.start(ctx, ops.PhaseQuestion)
	defer end()
	id := ops.CallIDFrom(ctx)
	t.record(qctx, ops.Question{Owner: sess.ID, CallID: id, Kind: kind, Subject: subject, Reason: q.Reason})
	actx, cancel := context.WithTimeout(qctx, t.opts.ApprovalTimeout)
	defer cancel()
	a, err := ap.Approve(actx, q)
	choice, by := answerOf(actx, a, err)
	t.record(qctx, ops.Answer{Owner: sess.ID, CallID: id, Kind: kind, Choice: choice, AnsweredBy: by})
	return a, err
}

// grant records a permission given beyond this call.
func (t *Toolset) grant(ctx context.Context, sess Session, kind, subject, scope string) {
	t.record(ctx, ops.Grant{Owner: sess.ID, CallID: ops.CallIDFrom(ctx), Kind: kind, Subject: subject, Scope: scope})
}

// sandboxOf names the sandbox a command started on on with spec runs in
// (the Spawn event's Sandbox).
func (t *Toolset) sandboxOf(on target, spec shell.Spec) string {
	switch {
	case on.outside:
		return "outside"
	case on.ex != t.ex || !t.opts.Sandbox.Enforced:
		return "none"
	case spec.Narrowing != nil && spec.Narrowing.Mode != "":
		return spec.Narrowing.Mode
	case t.opts.Sandbox.Mode != "":
		return t.opts.Sandbox.Mode
	}
	return "workspace-write"
}

// hostOf is the host name of on's events ("" for this machine).
func hostOf(on target) string {
	if h, ok := strings.CutPrefix(on.kind, kindBash+"@"); ok {
		return h
	}
	return ""
}

// spawned records the start of a command's process on on.
func (t *Toolset) spawned(ctx context.Context, sess Session, on target, spec shell.Spec, task string) {
	t.record(ctx, ops.Spawn{Owner: sess.ID, CallID: ops.CallIDFrom(ctx), Task: task, Host: hostOf(on), Sandbox: t.sandboxOf(on, spec)})
}

// ended records the end of a command's process, started at began, and
// each operation its sandbox recorded denying it.
func (t *Toolset) processEnded(ctx context.Context, owner, callID, task, host string, res shell.Result, began time.Time) {
	if t.opts.Recorder == nil {
		return
	}
	if res.Sandbox != nil {
		for _, d := range res.Sandbox.Denied {
			e := ops.Denied{Owner: owner, CallID: callID, Task: task, Host: host, Path: d.Path, Op: d.Op, Reason: d.Reason}
			if d.Host != "" {
				e.Destination = joinHostPort(d.Host, d.Port)
			}
			t.record(ctx, e)
		}
	}
	e := ops.Process{Owner: owner, CallID: callID, Task: task, Host: host, Signal: res.Signal, TimedOut: res.TimedOut,
		Duration: time.Since(began), OutputBytes: res.Stdout.Size + res.Stderr.Size}
	if res.ExitCode != nil {
		e.ExitCode = *res.ExitCode
	}
	t.record(ctx, e)
}

func joinHostPort(host string, port int) string {
	if port == 0 {
		return host
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// withValues is ctx, its deadline and cancellation, with the values of
// values: a question asked on an executor's context recorded as the
// call's (its id, its span).
func withValues(ctx, values context.Context) context.Context {
	return valuesOf{ctx, values}
}

type valuesOf struct {
	context.Context
	values context.Context
}

func (v valuesOf) Value(key any) any { return v.values.Value(key) }

// taskEvents records the end of a task's process: when the task has its
// id and the process has ended, whichever comes last (a command may end
// before the runtime names its task).
type taskEvents struct {
	t            *Toolset
	ctx          context.Context // the call's values, never its cancellation
	owner, host  string
	callID       string
	began        time.Time
	mu           sync.Mutex
	task         string
	isNamed, end bool
	res          shell.Result
}

// taskEvents returns the recorder of a task started by the call of ctx,
// whose command began at began; nil without a recorder.
func (t *Toolset) taskEvents(ctx context.Context, sess Session, on target, began time.Time) *taskEvents {
	if t.opts.Recorder == nil {
		return nil
	}
	return &taskEvents{t: t, ctx: context.WithoutCancel(ctx), owner: sess.ID, host: hostOf(on), callID: ops.CallIDFrom(ctx), began: began}
}

// named gives the task its id.
func (e *taskEvents) named(id string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.task, e.isNamed = id, true
	if e.end {
		e.t.processEnded(e.ctx, e.owner, e.callID, e.task, e.host, e.res, e.began)
	}
}

// over says the process ended with res (the first call counts).
func (e *taskEvents) over(res shell.Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end {
		return
	}
	e.end, e.res = true, res
	if e.isNamed {
		e.t.processEnded(e.ctx, e.owner, e.callID, e.task, e.host, e.res, e.began)
	}
}

// killed records the kill of each task of owner still running, for
// reason ("session_end", "shutdown").
func (t *Toolset) killed(owner, reason string) {
	if t.opts.Recorder == nil || t.opts.Tasks == nil {
		return
	}
	for _, info := range t.opts.Tasks.List(owner) {
		if info.Status == tasks.StatusRunning || info.Status == tasks.StatusStopping {
			t.record(context.Background(), ops.Kill{Owner: owner, Task: info.ID, Host: taskHost(info.Kind), Reason: reason})
		}
	}
}

// taskHost is the host of a task of kind ("bash@<host>"), "" here.
func taskHost(kind string) string {
	_, h, _ := strings.Cut(kind, "@")
	return h
}

// Shutdown records the kill, at shutdown, of every task still running
// (docs/operations.md): a server calls it before it closes the task
// runtime, which ends them.
func (t *Toolset) Shutdown() {
	if t.opts.Recorder == nil || t.opts.Tasks == nil {
		return
	}
	for _, owner := range t.opts.Tasks.Owners() {
		t.killed(owner, "shutdown")
	}
}
