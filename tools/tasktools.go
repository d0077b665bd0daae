package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/conch-dev/conch/tasks"
)

const (
	msgTaskIDPrefix  = "invalid task_id: expected a non-empty string, got "
	msgWait          = "invalid wait: expected a boolean"
	msgWaitTimeout   = "invalid timeout_ms: expected a positive number, got "
	msgReason        = "invalid reason: expected a string"
	noNewOutput      = "(no new output)"
	noTasks          = "(no background tasks)"
	msgWaitAborted   = "wait aborted"
	requestedKillFmt = "requested cancellation of task "
)

// taskID reads the required task_id argument.
func taskID(a rawArgs) (string, error) {
	id, ok := a.nonEmptyString("task_id")
	if !ok {
		return "", argErr(msgTaskIDPrefix + a.shownValue("task_id"))
	}
	return id, nil
}

func (t *Toolset) runtime() (*tasks.Runtime, *Result) {
	if t.opts.Tasks == nil {
		r := errorResult(msgNoRuntime)
		return nil, &r
	}
	return t.opts.Tasks, nil
}

// taskCall reads what task_output and task_kill share: a runtime, and the
// task_id argument. fail is the error result when either is missing.
func (t *Toolset) taskCall(raw json.RawMessage) (rt *tasks.Runtime, a rawArgs, id string, fail *Result) {
	if rt, fail = t.runtime(); fail != nil {
		return nil, nil, "", fail
	}
	a = parseArgs(raw)
	id, err := taskID(a)
	if err != nil {
		r := errorResult(err.Error())
		return nil, nil, "", &r
	}
	return rt, a, id, nil
}

func (t *Toolset) taskOutput(ctx context.Context, sess Session, raw json.RawMessage) Result {
	rt, a, id, fail := t.taskCall(raw)
	if fail != nil {
		return *fail
	}
	wait, ok := a.optBool("wait")
	if !ok {
		return errorResult(msgWait)
	}
	timeout, _, ok, shown := a.optMillis("timeout_ms")
	if !ok {
		return errorResult(msgWaitTimeout + shown)
	}
	if timeout == 0 {
		timeout = t.opts.DefaultWait
	}
	timeout = min(timeout, t.opts.MaxWait)
	if _, err := rt.Get(sess.ID, id); err != nil {
		return errorResult(err.Error())
	}
	if wait {
		if _, err := rt.Wait(ctx, sess.ID, id, timeout); err != nil {
			if errors.Is(err, tasks.ErrWaitAborted) {
				return errorResult(msgWaitAborted)
			}
			return errorResult(err.Error())
		}
	}
	delta, info, err := rt.Read(sess.ID, id)
	if err != nil {
		return errorResult(err.Error())
	}
	text := delta
	if text == "" {
		text = noNewOutput
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	st := statusOf(info)
	return Result{
		Text:  text + st.StatusLine(),
		Value: TaskOutputValue{TaskID: info.ID, Status: string(st.Status), Detail: st.Detail, Output: delta},
	}
}

// statusOf is the outcome to show for a task now: its settled outcome, or
// its live status with no detail.
func statusOf(info tasks.Info) tasks.Outcome {
	if info.Status.Settled() {
		return info.Outcome
	}
	return tasks.Outcome{Status: info.Status}
}

func (t *Toolset) taskList(sess Session) Result {
	rt, fail := t.runtime()
	if fail != nil {
		return *fail
	}
	infos := rt.List(sess.ID)
	v := TaskListValue{Tasks: []TaskEntry{}}
	if len(infos) == 0 {
		return Result{Text: noTasks, Value: v}
	}
	lines := make([]string, 0, len(infos))
	for _, info := range infos {
		st := statusOf(info)
		lines = append(lines, info.ID+" ["+info.Kind+"] "+string(st.Status)+" — "+info.Label)
		v.Tasks = append(v.Tasks, TaskEntry{ID: info.ID, Kind: info.Kind, Status: string(st.Status), Detail: st.Detail, Label: info.Label})
	}
	return Result{Text: strings.Join(lines, "\n"), Value: v}
}

func (t *Toolset) taskKill(sess Session, raw json.RawMessage) Result {
	rt, a, id, fail := t.taskCall(raw)
	if fail != nil {
		return *fail
	}
	reason, ok := a.optString("reason")
	if !ok {
		return errorResult(msgReason)
	}
	if reason == "" {
		reason = "killed by task_kill"
	}
	info, already, err := rt.Kill(sess.ID, id, reason)
	if err != nil {
		return errorResult(err.Error())
	}
	st := statusOf(info)
	v := TaskKillValue{TaskID: info.ID, Status: string(st.Status), Detail: st.Detail, AlreadyFinished: already}
	if already {
		return Result{Text: "task " + info.ID + " had already finished " + st.StatusLine(), Value: v}
	}
	return Result{Text: requestedKillFmt + info.ID, Value: v}
}
