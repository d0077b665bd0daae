package tools

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// Validation messages of CONTRACT 3.2.
const (
	msgCommand            = "invalid command: expected a non-empty string"
	msgDescription        = "invalid description: expected a non-empty string"
	msgTimeoutPrefix      = "invalid timeoutMs: expected a positive number, got "
	msgWorkdir            = "invalid workdir: expected a string"
	msgBackgroundType     = "invalid run_in_background: expected a boolean"
	msgBackgroundDisabled = "run_in_background is disabled for this deployment (enableRunInBackground: false)"
	msgNoRuntime          = "background tasks unavailable: no task runtime is configured"
	msgAborted            = "tool call aborted"
)

// BashArgs are the bash tool's arguments once validated. Nothing else a
// model sends (env, stdin, stdoutMaxBytes, …) is kept.
type BashArgs struct {
	Command     string
	Description string
	Timeout     time.Duration // 0: not given
	Workdir     string        // "": not given
	Background  bool
}

// ParseBashArgs validates a model's arguments in the contract's order.
// backgroundAllowed is false when the deployment disabled background runs.
func ParseBashArgs(raw json.RawMessage, backgroundAllowed bool) (BashArgs, error) {
	a := parseArgs(raw)
	var b BashArgs
	var ok bool
	if b.Command, ok = a.nonEmptyString("command"); !ok {
		return b, argErr(msgCommand)
	}
	if b.Description, ok = a.nonEmptyString("description"); !ok {
		return b, argErr(msgDescription)
	}
	d, _, ok, shown := a.optMillis("timeoutMs")
	if !ok {
		return b, argErr(msgTimeoutPrefix + shown)
	}
	b.Timeout = d
	if b.Workdir, ok = a.optString("workdir"); !ok {
		return b, argErr(msgWorkdir)
	}
	if backgroundAllowed {
		if b.Background, ok = a.optBool("run_in_background"); !ok {
			return b, argErr(msgBackgroundType)
		}
	} else if a.present("run_in_background") {
		// The schema does not offer it; a model that sends it anyway is
		// told so rather than silently run in the foreground.
		bg, ok := a.optBool("run_in_background")
		if !ok {
			return b, argErr(msgBackgroundType)
		}
		if bg {
			return b, argErr(msgBackgroundDisabled)
		}
	}
	return b, nil
}

// managedEnv is the CONCH_* overlay of one call, built fresh each time so
// no call can change another's.
func (t *Toolset) managedEnv(sess Session) map[string]string {
	return map[string]string{
		"CONCH_SHELL":      "1",
		"CONCH_SESSION_ID": sess.ID,
		"CONCH_HOME":       t.opts.Home,
	}
}

// Request builds the executor request of a validated call: the workdir is
// resolved against the session's cwd; nothing but the named arguments and
// the managed overlay reaches it.
func (t *Toolset) Request(sess Session, b BashArgs) shell.Request {
	wd := b.Workdir
	if sess.Cwd != "" {
		switch {
		case wd == "":
			wd = sess.Cwd
		case !filepath.IsAbs(wd):
			wd = filepath.Join(sess.Cwd, wd)
		}
	}
	return shell.Request{
		Command:    b.Command,
		Workdir:    wd,
		Timeout:    b.Timeout,
		ManagedEnv: t.managedEnv(sess),
		Owner:      sess.ID,
	}
}

func (t *Toolset) bash(ctx context.Context, sess Session, raw json.RawMessage, co CallOptions) Result {
	b, err := ParseBashArgs(raw, t.background())
	if err != nil {
		return errorResult(err.Error())
	}
	if b.Background && t.opts.Tasks == nil {
		return errorResult(msgNoRuntime)
	}
	if ctx.Err() != nil {
		return errorResult(msgAborted)
	}
	spec, err := t.ex.Resolve(t.Request(sess, b))
	if err != nil {
		return errorResult(err.Error())
	}
	if b.Background {
		return t.startBackground(sess, b, spec)
	}
	return t.foreground(ctx, sess, b, spec, co)
}

func (t *Toolset) startBackground(sess Session, b BashArgs, spec shell.Spec) Result {
	info, err := t.opts.Tasks.Start(sess.ID, KindBash, b.Command, func() (tasks.Handle, error) {
		p, err := t.ex.Start(spec)
		if err != nil {
			return nil, err
		}
		return NewProcessHandle(p), nil
	})
	if err != nil {
		return errorResult(err.Error())
	}
	return Result{
		Text:  "started background task " + info.ID,
		Value: BackgroundValue{Kind: "background", TaskID: info.ID},
	}
}

func (t *Toolset) foreground(ctx context.Context, sess Session, b BashArgs, spec shell.Spec, co CallOptions) Result {
	p, err := t.ex.Launch(spec)
	if err != nil {
		return errorResult(err.Error())
	}
	start := time.Now()
	var yield <-chan time.Time
	if t.opts.YieldAfter > 0 && t.opts.Tasks != nil && t.background() {
		tm := time.NewTimer(t.opts.YieldAfter)
		defer tm.Stop()
		yield = tm.C
	}
	// A timer re-armed after each report, not a ticker: two reports are
	// never closer than ProgressEvery, whatever the scheduling jitter.
	var tick <-chan time.Time
	var progress *time.Timer
	if co.Progress != nil {
		progress = time.NewTimer(t.opts.ProgressEvery)
		defer progress.Stop()
		tick = progress.C
	}
	for {
		select {
		case <-p.Done():
			return finished(p)
		case <-ctx.Done():
			if ended(p) {
				return finished(p)
			}
			p.Kill()
			<-p.Done()
			return errorResult(msgAborted)
		case <-tick:
			o, e := p.Written()
			co.Progress(Progress{Elapsed: time.Since(start), Bytes: o + e})
			progress.Reset(t.opts.ProgressEvery)
		case <-yield:
			// select picks at random among ready cases: a command that
			// ended while a slow progress report ran is not "still running".
			if ended(p) {
				return finished(p)
			}
			if r, ok := t.yieldToTask(sess, b, p); ok {
				return r
			}
			yield = nil // the session is at its task limit: stay in the foreground
		}
	}
}

// ended reports whether p has settled.
func ended(p shell.Process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// finished is the result of a foreground command that has ended.
func finished(p shell.Process) Result {
	res := p.Result()
	return Result{Text: RenderForeground(res), Value: foregroundValue(res)}
}

// yieldToTask moves a running foreground command into a background task.
// What it printed so far goes in this result; the task's reads carry on
// from there, so no byte is lost or repeated. Its timeout still applies.
func (t *Toolset) yieldToTask(sess Session, b BashArgs, p shell.Process) (Result, bool) {
	h := NewProcessHandle(p)
	info, err := t.opts.Tasks.Start(sess.ID, KindBash, b.Command, func() (tasks.Handle, error) { return h, nil })
	if err != nil {
		return Result{}, false
	}
	ms := t.opts.YieldAfter.Milliseconds()
	marker := "[still running after " + strconv.FormatInt(ms, 10) + "ms; moved to background task " + info.ID +
		": read it with task_output, stop it with task_kill]"
	return Result{
		Text:  withMarkers(h.Read(), marker),
		Value: YieldedValue{Kind: "yielded", TaskID: info.ID, YieldedAfterMs: ms},
	}, true
}
