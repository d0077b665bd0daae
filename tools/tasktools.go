package tools

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

const (
	msgTaskIDPrefix = "invalid task_id: expected a non-empty string, got "
	msgWait         = "invalid wait: expected a boolean"
	msgWaitTimeout  = "invalid timeout_ms: expected a positive number, got "
	msgReason       = "invalid reason: expected a string"
	noNewOutput     = "(no new output)"
	noTasks         = "(no background tasks)"
	msgWaitAborted  = "wait aborted"
	// limitHint follows the runtime's limit error: how a model frees a
	// slot, in the words of these tools.
	limitHint = "; use task_kill to stop an unneeded task, wait for it to finish, then retry"
)

// killSettleSlack is how long task_kill waits beyond the executor's grace
// for a killed task to end: the SIGKILL that follows the grace still takes
// a moment to land and the task a moment to settle.
const killSettleSlack = time.Second

// defaultGrace stands in for the grace of an executor that does not tell
// its own (shell.Graceful): the local provider's default.
const defaultGrace = 3 * time.Second

// taskID reads the required task_id argument.
func taskID(a rawArgs) (string, error) {
	id, ok := a.nonEmptyString("task_id")
	if !ok {
		return "", argErr(msgTaskIDPrefix + a.shownValue("task_id"))
	}
	return id, nil
}

// taskError is the text of an error from the task runtime: its own words,
// plus, for the task limit, how to free a slot with these tools.
func taskError(err error) string {
	if _, ok := errors.AsType[*tasks.LimitError](err); ok {
		return err.Error() + limitHint
	}
	return err.Error()
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
func (t *Toolset) taskCall(a rawArgs) (rt *tasks.Runtime, id string, fail *Result) {
	if rt, fail = t.runtime(); fail != nil {
		return nil, "", fail
	}
	id, err := taskID(a)
	if err != nil {
		r := errorResult(err.Error())
		return nil, "", &r
	}
	return rt, id, nil
}

func (t *Toolset) taskOutput(ctx context.Context, sess Session, a rawArgs, co CallOptions) Result {
	rt, id, fail := t.taskCall(a)
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
		return errorResult(taskError(err))
	}
	waitedOut := false
	if wait {
		info, err := t.waitTask(ctx, rt, sess.ID, id, timeout, co)
		if err != nil {
			if errors.Is(err, tasks.ErrWaitAborted) {
				return errorResult(msgWaitAborted)
			}
			return errorResult(taskError(err))
		}
		waitedOut = !info.Settled()
	}
	return t.readTask(rt, sess, id, waitedOut, timeout)
}

// readTask is task_output's answer: the read of task id (or "(no new
// output)"), then its status line, or, after a wait of waited that ran
// out, the still-running line.
func (t *Toolset) readTask(rt *tasks.Runtime, sess Session, id string, waitedOut bool, waited time.Duration) Result {
	delta, info, err := rt.Read(sess.ID, id)
	if err != nil {
		return errorResult(taskError(err))
	}
	text := delta
	if text == "" {
		text = noNewOutput
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	line := info.StatusLine()
	if waitedOut && !info.Settled() {
		line = waitedOutLine(info.Status, waited)
	}
	v := TaskOutputValue{TaskID: info.ID, TaskState: taskState(info), Output: delta}
	if info.Settled() {
		if h, _, err := rt.Handle(sess.ID, id); err == nil {
			if sb, ok := h.(sandboxed); ok {
				v.Sandbox = sb.Sandbox()
			}
		}
	}
	return Result{Text: text + line, Value: v}
}

// sandboxed is a task handle whose work may have run under a sandbox.
type sandboxed interface {
	Sandbox() *shell.SandboxReport
}

// waitedOutLine is the status line of a wait that ran out: "[status:
// running; still running after waiting <ms>ms]".
func waitedOutLine(st tasks.Status, waited time.Duration) string {
	return "[status: " + string(st) + "; still running after waiting " + strconv.FormatInt(waited.Milliseconds(), 10) + "ms]"
}

// waitTask waits for task id like tasks.Runtime.Wait. With a progress
// callback it waits in steps of Options.ProgressEvery and reports the
// task's run time and output so far after each step that did not end the
// wait, as a foreground call does.
func (t *Toolset) waitTask(ctx context.Context, rt *tasks.Runtime, owner, id string, timeout time.Duration, co CallOptions) (tasks.Info, error) {
	if co.Progress == nil {
		return rt.Wait(ctx, owner, id, timeout)
	}
	deadline := time.Now().Add(timeout)
	for {
		// Wait takes 0 to mean "no timeout": never pass it less than 1ns.
		step := max(min(time.Until(deadline), t.opts.ProgressEvery), 1)
		info, err := rt.Wait(ctx, owner, id, step)
		if err != nil || info.Settled() || !time.Now().Before(deadline) {
			return info, err
		}
		co.Progress(Progress{Elapsed: info.Elapsed, Bytes: info.Written})
	}
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
	// Running (and stopping) tasks first, each group in start order.
	slices.SortStableFunc(infos, func(a, b tasks.Info) int {
		return cmp.Compare(boolRank(a.Settled()), boolRank(b.Settled()))
	})
	lines := make([]string, 0, len(infos))
	for _, info := range infos {
		lines = append(lines, taskLine(info))
		v.Tasks = append(v.Tasks, TaskEntry{ID: info.ID, Kind: info.Kind, TaskState: taskState(info), Label: info.Label})
	}
	return Result{Text: strings.Join(lines, "\n"), Value: v}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// taskLine is one task as task_list shows it: "<id> [<kind>] <status>[,
// <details>][, <N> processes still running], <elapsed> — <label>", e.g.
// "bash-1 [bash] completed, exit code: 1, 1m12s — go test -race ./...".
// The label is oneLineLabel's.
func taskLine(info tasks.Info) string {
	status := string(info.Status)
	if d := info.Outcome.Details(); d != "" {
		status += ", " + d
	}
	if info.Leftovers > 0 {
		status += ", " + strconv.Itoa(info.Leftovers) + " processes still running"
	}
	return info.ID + " [" + info.Kind + "] " + status + ", " + elapsed(info.Elapsed) + " — " + oneLineLabel(info.Label)
}

// elapsed renders a task's run time, short and truncated (never rounded
// up into the next unit): under a minute in seconds with one decimal
// ("0.0s", "4.1s", "59.9s"); under an hour in minutes and whole seconds
// ("1m0s", "1m12s", "59m59s"); from an hour on in hours and whole minutes
// ("1h0m", "2h3m", "100h0m"). A negative duration reads "0.0s".
func elapsed(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		tenths := int64(d / (100 * time.Millisecond))
		return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10) + "s"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m" + strconv.FormatInt(int64(d%time.Minute/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Hour), 10) + "h" + strconv.FormatInt(int64(d%time.Hour/time.Minute), 10) + "m"
}

// maxLabelRunes is how many characters of a command's first line a task
// line or a notice shows.
const maxLabelRunes = 80

// oneLineLabel is how a task line or a notice names a task: the label's
// first line (surrounding white space trimmed), cut to its first 80
// characters (runes, never a broken one), followed by "…" when it was cut
// or other lines followed.
func oneLineLabel(label string) string {
	label = strings.TrimSpace(label)
	first, rest, more := strings.Cut(label, "\n")
	first = strings.TrimRight(first, " \t\r")
	cut := more && strings.TrimSpace(rest) != ""
	if utf8.RuneCountInString(first) > maxLabelRunes {
		n := 0
		for i := range first {
			if n == maxLabelRunes {
				first = first[:i]
				break
			}
			n++
		}
		cut = true
	}
	if cut {
		return first + "…"
	}
	return first
}

func (t *Toolset) taskKill(ctx context.Context, sess Session, a rawArgs) Result {
	rt, id, fail := t.taskCall(a)
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
		return errorResult(taskError(err))
	}
	if already && info.Leftovers > 0 {
		// The task ended, but what it started runs on: that is what
		// the model wants stopped (docs/tasks.md#task_kill).
		n, after, err := rt.KillLeftovers(sess.ID, id)
		if err != nil {
			return errorResult("kill what task " + info.ID + " left running: " + err.Error())
		}
		if n > 0 {
			return Result{
				Text:  "killed what task " + info.ID + " left running (" + strconv.Itoa(n) + " processes) " + after.StatusLine(),
				Value: TaskKillValue{TaskID: after.ID, TaskState: taskState(after), AlreadyFinished: true, KilledLeftovers: n},
			}
		}
		info = after
	}
	if already {
		return Result{
			Text:  "task " + info.ID + " had already finished " + info.StatusLine(),
			Value: TaskKillValue{TaskID: info.ID, TaskState: taskState(info), AlreadyFinished: true},
		}
	}
	t.record(ctx, ops.Kill{Owner: sess.ID, Task: info.ID, Host: taskHost(info.Kind), Reason: "task_kill"})
	// Wait for the end the kill brings: SIGTERM, SIGKILL after the
	// grace, then the drain. A model told "killed" can rely on it.
	info, err = rt.Wait(ctx, sess.ID, id, t.killWait())
	if err != nil {
		if errors.Is(err, tasks.ErrWaitAborted) {
			return errorResult(msgAborted)
		}
		return errorResult(taskError(err))
	}
	v := TaskKillValue{TaskID: info.ID, TaskState: taskState(info)}
	if !info.Settled() {
		return Result{Text: "requested cancellation of task " + info.ID + "; it is still stopping", Value: v}
	}
	return Result{Text: "killed task " + info.ID + " " + info.StatusLine(), Value: v}
}

// killWait bounds task_kill's wait: the executor's grace plus
// killSettleSlack.
func (t *Toolset) killWait() time.Duration {
	grace := defaultGrace
	if g, ok := t.ex.(shell.Graceful); ok {
		grace = g.Grace()
	}
	return grace + killSettleSlack
}

// Notice is a completion notice for a model: the task it is about, and its
// text. A transport delivers Text after the call's result and may use
// TaskID to withdraw a notice it holds once the model read that task.
type Notice struct {
	TaskID string
	Text   string
	// Task holds the facts Text words, for a transport that words them
	// for another reader (see NoticeText).
	Task tasks.Notice
}

// String is the notice's text.
func (n Notice) String() string { return n.Text }

// renderNotice words a completion notice: "background task <id> (<kind>:
// <label>) finished <status line> after <elapsed>. Last output:\n<lines>\n
// Read all of it with task_output.", without "Last output:" and the lines
// when the task left no unread output.
func renderNotice(n tasks.Notice) string { return NoticeText(n, "task_output") }

// NoticeText words a completion notice like renderNotice, naming readWith
// as the way to read the output (an editor's user types a command, not a
// tool call).
func NoticeText(n tasks.Notice, readWith string) string {
	s := "background task " + n.ID + " (" + n.Kind + ": " + oneLineLabel(n.Label) + ") finished " +
		n.StatusLine() + " after " + elapsed(n.Elapsed) + "."
	if n.LastOutput != "" {
		s += " Last output:\n" + n.LastOutput + "\n"
	} else {
		s += " "
	}
	return s + "Read all of it with " + readWith + "."
}
