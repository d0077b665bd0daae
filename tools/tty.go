package tools

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// paramTTY is the bash parameter that runs a command on a terminal,
// offered when the executor has terminals (shell.Terminals).
const paramTTY = "tty"

// NameTaskInput is the tool that types into a terminal task.
const NameTaskInput = "task_input"

// InputIdle is how long a foreground tty call may go without output
// before it counts as waiting for input and moves to a task.
const InputIdle = 2000 * time.Millisecond

// The waits of task_input.
const (
	DefaultInputWait = 2000 * time.Millisecond
	MaxInputWait     = 30000 * time.Millisecond
)

// inputPoll is how often a foreground tty call looks for new output.
const inputPoll = 50 * time.Millisecond

const (
	msgTTYType   = "invalid tty: expected a boolean"
	msgText      = "invalid text: expected a string"
	msgKeys      = "invalid keys: expected an array of key names"
	msgInputWait = "invalid wait_ms: expected a positive number, got "
)

// waitingMarker ends the result of a tty call moved to a task because it
// waits for input (or passed the yield window).
func waitingMarker(id string) string {
	return "[waiting for input; moved to background task " + id +
		": send input with task_input, read it with task_output, stop it with task_kill]"
}

// noTerminal and inputFinished are task_input's refusals.
func noTerminal(id string) string { return "task " + id + " has no terminal (start it with tty: true)" }

func inputFinished(info tasks.Info) string {
	return "task " + info.ID + " has already finished " + info.Outcome.StatusLine()
}

// ttyPrompt is the terminal section for hosts that build system prompts,
// for deployments that offer tty.
const ttyPrompt = "A program that asks for input (a prompt, a REPL, a y/n question) needs `tty: true`; " +
	"when it waits for input its call returns the screen and moves it to a background task: " +
	"answer it with task_input (text, then keys such as Enter or C-c), and stop it with task_kill when done."

// terminalsOf returns ex's terminals, or nil when it has none.
func terminalsOf(ex shell.Executor) shell.Terminals {
	if ts, ok := ex.(shell.Terminals); ok {
		return ts
	}
	return nil
}

// terminals returns the executor's terminals when tty is offered: the
// executor has them and a call can move to a background task (a
// runtime, background execution enabled), where input reaches it.
func (t *Toolset) terminals() shell.Terminals {
	if t.opts.Tasks == nil || !t.background() {
		return nil
	}
	return terminalsOf(t.ex)
}

// ttyArg reads the tty parameter when it is offered (it was refused as
// unknown otherwise). ttyErr is a value that is not a boolean,
// reported after the other arguments' errors. A null tty is not given.
func (t *Toolset) ttyArg(a rawArgs) (tty bool, ttyErr error) {
	if t.terminals() == nil || !a.present(paramTTY) {
		return false, nil
	}
	if json.Unmarshal(a[paramTTY], &tty) != nil {
		return false, argErr(msgTTYType)
	}
	return tty, nil
}

// withParam adds a property, last, to an input schema.
func withParam(schema json.RawMessage, name, prop string) json.RawMessage {
	i := strings.Index(string(schema), `},"required"`)
	return json.RawMessage(string(schema[:i]) + `,"` + name + `":` + prop + string(schema[i:]))
}

const ttyProperty = `{"type":"boolean","description":"Run the command on a 120x40 terminal (TERM=xterm-256color) with the terminal as its input, for programs that prompt or draw a screen. ` +
	`When it waits for input (no output for 2000 ms), the call returns the screen so far and moves it to a background task: type into it with task_input. ` +
	`Its timeoutMs still applies to the task: give a long one for a session meant to last."}`

var taskInputInputSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"task_id":{"type":"string","description":"The id of a background task started with tty: true, e.g. bash-1."},` +
	`"text":{"type":"string","description":"Text to type, as is; a newline in it is Enter."},` +
	`"keys":{"type":"array","items":{"type":"string"},"description":"Keys to press after the text, in order: ` + term.KeyNames + `."},` +
	`"wait_ms":{"type":"number","description":"How long to wait for the program's answer, in milliseconds (default 2000, max 30000); the call returns early once the output has been quiet for 300 ms or the task ended."}` +
	`},"required":["task_id"],"additionalProperties":false}`)

var taskInputParams = lazyParams(taskInputInputSchema)

const taskInputDescription = "Type into a background task started with `tty: true`, then return what its terminal shows next, as `task_output` does " +
	"(the lines added, or the whole screen of a full-screen program, then the status line). " +
	"`text` is typed as is; then `keys` are pressed in order (`Enter`, `Tab`, `Escape`, `Backspace`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`, `PageUp`, `PageDown`, " +
	"`C-a` … `C-z` (`C-c` interrupts, `C-d` ends the input), `F1` … `F12`). " +
	"It waits up to `wait_ms` (default 2000 ms, at most 30000 ms) and returns early once the output has been quiet for 300 ms or the task ended."

// startTerminalTask starts a tty call in the background.
func (t *Toolset) startTerminalTask(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec) Result {
	info, err := t.opts.Tasks.Start(sess.ID, on.kind, b.Command, func() (tasks.Handle, error) {
		tm, err := on.terms.StartTerminal(spec)
		if err != nil {
			return nil, err
		}
		return t.terminalHandle(tm), nil
	})
	if err != nil {
		return errorResult(taskError(err))
	}
	t.spawned(ctx, sess, on, spec, info.ID)
	return Result{
		Text:  "started background task " + info.ID,
		Value: BackgroundValue{Kind: "background", TaskID: info.ID},
	}
}

func (t *Toolset) terminalHandle(tm shell.Terminal) *terminalHandle {
	return newTerminalHandle(tm, t.opts.MaxResultBytes-readReserve)
}

// foregroundTerminal runs a tty call in the foreground: until it ends,
// its timeout, or ctx, unless it waits for input (alive and silent for
// InputIdle) or passes the yield window first; then it moves to a task,
// where its timeout, counted from the call's start, still applies.
func (t *Toolset) foregroundTerminal(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec, co CallOptions) (Result, func(int) Result) {
	tm, err := on.terms.StartTerminal(spec)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	t.spawned(ctx, sess, on, spec, "")
	start := time.Now()
	timeout := time.NewTimer(spec.Timeout)
	defer timeout.Stop()
	var yield <-chan time.Time
	if t.yields() {
		y := time.NewTimer(t.opts.YieldAfter)
		defer y.Stop()
		yield = y.C
	}
	poll := time.NewTicker(inputPoll)
	defer poll.Stop()
	var progress <-chan time.Time
	if co.Progress != nil {
		pt := time.NewTicker(t.opts.ProgressEvery)
		defer pt.Stop()
		progress = pt.C
	}
	// The card of an editor gets the raw stream live, as a piped
	// command's gets its pipes.
	live := newLiveOutput(tm, func() (int64, int64) { return tm.Written(), 0 }, co)
	sample, stop := live.pace()
	defer stop()
	movable := true
	written, lastOut := tm.Written(), time.Now()
	end := func(timedOut, aborted bool) (Result, func(int) Result) {
		<-tm.Done()
		code, sig := tm.Exit()
		res := shell.Result{ExitCode: code, Signal: sig, TimedOut: timedOut, Aborted: aborted, Timeout: spec.Timeout,
			Stdout: terminalOutput(tm)}
		if f, ok := tm.(shell.TerminalFindings); ok {
			res.Notes, res.Sandbox = f.Findings()
		}
		counted := res
		counted.Stdout.Size = tm.Written() // what the terminal wrote, not the screen shown
		t.processEnded(ctx, sess.ID, ops.CallIDFrom(ctx), "", hostOf(on), counted, start)
		if live != nil {
			live.finish(&res, false)
		}
		return Result{}, func(budget int) Result {
			text, v := renderForeground(res, budget)
			return Result{Text: text, Value: v}
		}
	}
	move := func() (func(int) Result, bool) {
		if !movable || ended(tm) {
			return nil, false
		}
		render, err := t.moveTerminal(sess, b, on, tm, start, spec.Timeout)
		if err != nil {
			movable = false // the session is at its task limit: stay in the foreground
			return nil, false
		}
		if live != nil {
			live.finish(nil, false)
		}
		return render, true
	}
	for {
		select {
		case <-tm.Done():
			return end(false, false)
		case <-ctx.Done():
			tm.Kill()
			if !co.KeepAborted {
				<-tm.Done()
				if live != nil {
					live.finish(nil, false)
				}
				return errorResult(msgAborted), nil
			}
			return end(false, true)
		case <-timeout.C:
			tm.Kill()
			return end(true, false)
		case <-sample:
			live.tick()
		case <-progress:
			co.Progress(Progress{Elapsed: time.Since(start), Bytes: tm.Written(), LastLine: lastScreenLine(tm)})
		case <-yield:
			if render, ok := move(); ok {
				return Result{}, render
			}
		case <-poll.C:
			if w := tm.Written(); w != written {
				written, lastOut = w, time.Now()
			} else if time.Since(lastOut) >= InputIdle {
				if render, ok := move(); ok {
					return Result{}, render
				}
				lastOut = time.Now() // not movable: look again after another idle period
			}
		}
	}
}

// moveTerminal makes the running terminal tm, started at start with the
// given timeout, a task of sess that the rest of the timeout kills; the
// result shows the screen so far and says how to go on. The task's run
// time counts from start.
func (t *Toolset) moveTerminal(sess Session, b bashArgs, on target, tm shell.Terminal, start time.Time, timeout time.Duration) (func(int) Result, error) {
	h := t.terminalHandle(tm)
	h.began = start
	after := time.Since(start)
	info, err := t.opts.Tasks.Start(sess.ID, on.kind, b.Command, func() (tasks.Handle, error) {
		h.expire(timeout-after, timeout)
		return h, nil
	})
	if err != nil {
		return nil, err
	}
	// Not the handle's Read, which fits a task read's budget: the screen
	// is fitted with the marker, and names the raw stream's spill file
	// when it is cut.
	screen := tm.Read()
	marker := waitingMarker(info.ID)
	return func(budget int) Result {
		shown := fitTerminal(tm, screen, budget, marker)
		raw := tm.Raw()
		return Result{
			Text: withMarkers(shown, marker),
			Value: YieldedValue{Kind: "yielded", TaskID: info.ID, YieldedAfterMs: after.Milliseconds(), TimeoutMs: timeout.Milliseconds(),
				Stdout: streamValue(shown, shown != screen, HostPath(raw.Host, raw.SpillPath), int64(len(screen)), int64(strings.Count(screen, "\n")))},
		}
	}, nil
}

// terminalOutput is an ended terminal as a result's stdout: the text is
// what the terminal shows (a read), and the whole output is the raw
// stream's spill file, escape sequences included, when the raw stream
// outgrew the executor's tail (else the cut line says why there is none).
func terminalOutput(tm shell.Terminal) shell.Output {
	raw := tm.Raw()
	return shell.Output{Text: nameScrolled(tm.Read(), rawWhere(raw)), SpillPath: raw.SpillPath, Host: raw.Host, SpillErr: raw.SpillErr}
}

// lastScreenLine is the last non-blank line on tm's screen, cut to
// MaxProgressLine bytes, for a progress report.
func lastScreenLine(tm shell.Terminal) string {
	s := strings.TrimRight(tm.Peek(4*MaxProgressLine), " \n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return cutStart(s, MaxProgressLine)
}

// taskInput types into a terminal task and returns the read that follows.
// The arguments are checked first (key names included, so nothing is
// typed when one is unknown), then the task.
func (t *Toolset) taskInput(ctx context.Context, sess Session, a rawArgs) Result {
	rt, id, fail := t.taskCall(a)
	if fail != nil {
		return *fail
	}
	text, ok := a.optString("text")
	if !ok {
		return errorResult(msgText)
	}
	var keys []string
	if a.present("keys") && json.Unmarshal(a["keys"], &keys) != nil {
		return errorResult(msgKeys)
	}
	wait, _, ok, shown := a.optMillis("wait_ms")
	if !ok {
		return errorResult(msgInputWait + shown)
	}
	if wait == 0 {
		wait = DefaultInputWait
	}
	wait = min(wait, MaxInputWait)
	if _, err := term.ParseKeys(keys); err != nil {
		return errorResult(err.Error())
	}
	h, info, err := rt.Handle(sess.ID, id)
	if err != nil {
		return errorResult(taskError(err))
	}
	th, ok := h.(*terminalHandle)
	if !ok {
		return errorResult(noTerminal(id))
	}
	if info.Settled() {
		return errorResult(inputFinished(info))
	}
	if err := th.Input(text, keys, wait); err != nil {
		// The program exited after the check: say how, once it settled.
		info, werr := rt.Wait(ctx, sess.ID, id, t.killWait())
		if werr != nil || !info.Settled() {
			return errorResult(err.Error())
		}
		return errorResult(inputFinished(info))
	}
	return t.readTask(rt, sess, id, false, 0)
}
