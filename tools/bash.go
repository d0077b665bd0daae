package tools

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// Validation messages (docs/tools.md#validation).
const (
	msgCommand            = "invalid command: expected a non-empty string"
	msgDescription        = "invalid description: expected a non-empty string"
	msgTimeoutPrefix      = "invalid timeoutMs: expected a positive number, got "
	msgWorkdir            = "invalid workdir: expected a string"
	msgBackgroundType     = "invalid run_in_background: expected a boolean"
	msgBackgroundDisabled = "run_in_background is disabled for this deployment (enableRunInBackground: false)"
	msgNoRuntime          = "background tasks unavailable: no task runtime is configured"
	msgAborted            = "tool call aborted"
	msgHostType           = "invalid host: expected a string"
	msgOutsideType        = "invalid outside_sandbox: expected a boolean"
	msgJustification      = "invalid justification: expected a non-empty string"
)

// The parameters of a call that asks to run outside the sandbox
// (docs/sandbox.md#escalation).
const (
	paramOutside       = "outside_sandbox"
	paramJustification = "justification"
)

// bashArgs are the bash tool's arguments once validated: the call's
// arguments are decoded once (parseArgs), into this, which goes down the
// call's path. Nothing else a model sends (env, stdin, stdoutMaxBytes, …)
// is kept.
type bashArgs struct {
	Command     string
	Description string
	Timeout     time.Duration // 0: not given
	Workdir     string        // "": not given
	Background  bool
	// Outside: the model asks to run the command outside the sandbox,
	// for Justification (outside_sandbox, justification).
	Outside       bool
	Justification string
	// Host is the host parameter (HostLocal when not given); TTY the tty
	// parameter.
	Host string
	TTY  bool
}

// readBashArgs validates the model's arguments, decoded once (a), in the
// contract's order, once checkKeys has refused any key the deployment's
// schema does not offer (run_in_background included when the deployment
// disabled it: a model that sends it anyway is told that, not that the
// key is unknown). backgroundAllowed is false when the deployment
// disabled background runs. host, tty, outside_sandbox and justification
// are read by their own functions, whose errors come after these.
func readBashArgs(a rawArgs, backgroundAllowed bool) (bashArgs, error) {
	var b bashArgs
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
		if b.Background, ok = a.optBool(paramBackground); !ok {
			return b, argErr(msgBackgroundType)
		}
	} else if a.present(paramBackground) {
		// The schema does not offer it; a model that sends it anyway is
		// told so rather than silently run in the foreground.
		bg, ok := a.optBool(paramBackground)
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

// request builds the executor request of a validated call: the workdir,
// "~" expanded, is resolved against the session's cwd, which is also the
// owner's workspace (a contained session's sandbox is built for it);
// nothing but the named arguments and the managed overlay reaches it.
func (t *Toolset) request(sess Session, b bashArgs) shell.Request {
	wd := t.expandHome(b.Workdir)
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
		Workspace:  sess.Cwd,
		Grants:     t.grants.of(sess.ID),
	}
}

// readReserve is the room a task_output result keeps after a read, as
// JSON encodes it: for the status line (a waited-out one included) and
// the structured value's other members (docs/tools.md#structured-value).
const readReserve = 1000

// handle makes p a task whose reads fit a task_output result.
func (t *Toolset) handle(p shell.Process) *processHandle {
	return newProcessHandle(p, t.opts.MaxResultBytes-readReserve)
}

// taskHandle makes p, started on on, a task; a command outside the
// sandbox has what it left running killed when it ends, before the task
// settles. A non-zero began is when the command started, before it became
// a task (a yielded one): its run time counts from there.
func (t *Toolset) taskHandle(p shell.Process, on target, began time.Time, ev *taskEvents) tasks.Handle {
	h := t.handle(p)
	h.began = began
	h.events = ev
	if !on.outside {
		return h
	}
	return newOutsideHandle(h)
}

// expandHome expands "~" and "~/…" to the home directory, as a shell
// would: the home of the user the default executor runs commands as,
// which the executor knows (shell.FileSystem). An executor that does not
// say, or a home that cannot be found, leaves the path as given (and the
// workdir error names it).
func (t *Toolset) expandHome(wd string) string {
	if !shell.IsHomeRelative(wd) {
		return wd
	}
	fs, ok := t.ex.(shell.FileSystem)
	if !ok {
		return wd
	}
	home, err := fs.Home()
	if err != nil {
		return wd
	}
	return filepath.Join(home, wd[1:])
}

// HostDir checks dir, an absolute path on the default executor's host
// (a session's working directory from its client), with the executor:
// it returns dir's real path, or an error wrapping fs.ErrNotExist,
// shell.ErrNotDir or another cause. An executor that is not a
// shell.FileSystem cannot say: dir is returned as given, and a command
// run there reports a missing workdir itself.
func (t *Toolset) HostDir(dir string) (string, error) {
	fs, ok := t.ex.(shell.FileSystem)
	if !ok {
		return dir, nil
	}
	return fs.Dir(dir)
}

// bash runs the bash tool. A result that holds a command's output comes
// as render, to be rendered within the budget the caller leaves it.
// a is raw as parseArgs decoded it.
func (t *Toolset) bash(ctx context.Context, sess Session, raw json.RawMessage, a rawArgs, co CallOptions) (Result, func(budget int) Result) {
	params, hidden := t.bashKeys()
	if err := checkKeys(NameBash, raw, a, params, hidden...); err != nil {
		return errorResult(err.Error()), nil
	}
	b, err := readBashArgs(a, t.background())
	if err != nil {
		return errorResult(err.Error()), nil
	}
	host, hostErr := t.hostArg(a)
	tty, ttyErr := t.ttyArg(a)
	outside, justification, outsideErr := t.outsideArg(a)
	if ttyErr != nil {
		return errorResult(ttyErr.Error()), nil
	}
	if outsideErr != nil {
		return errorResult(outsideErr.Error()), nil
	}
	if hostErr != nil {
		return errorResult(hostErr.Error()), nil
	}
	b.Outside, b.Justification, b.Host, b.TTY = outside, justification, host, tty
	switch {
	case b.Outside && host != HostLocal:
		return errorResult(msgOutsideHostPrefix + host), nil
	case b.Outside && tty:
		return errorResult(msgOutsideTTY), nil
	}
	if b.Background && t.opts.Tasks == nil {
		return errorResult(msgNoRuntime), nil
	}
	if ctx.Err() != nil {
		return errorResult(msgAborted), nil
	}
	on := t.on(host)
	if tty {
		if on.terms = terminalsOf(on.ex); on.terms == nil {
			return errorResult("tty is not available on host " + host), nil
		}
	}
	req := t.request(sess, b)
	if host != HostLocal {
		req.Workdir, req.Workspace, req.Grants = b.Workdir, "", nil
	}
	spec, err := on.ex.Resolve(req)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	n, fail := t.permit(ctx, sess, b.Command, spec.Workdir, host, co.Approver)
	if fail != nil {
		return *fail, nil
	}
	spec.Narrowing = n // decided with the rules, from the same reading of the file
	if b.Outside {
		if fail := t.askOutside(ctx, sess, b, spec.Workdir, co); fail != nil {
			return *fail, nil
		}
		on = target{ex: t.opts.Unsandboxed, kind: kindBash, outside: true}
		if spec, err = on.ex.Resolve(req); err != nil {
			return errorResult(err.Error()), nil
		}
	}
	if ctx.Err() != nil { // cancelled while the user was answering
		return errorResult(msgAborted), nil
	}
	defer t.lendNetworkAsker(ctx, sess, on, co.Approver)()
	switch {
	case tty && b.Background:
		return t.startTerminalTask(ctx, sess, b, on, spec), nil
	case tty:
		return t.foregroundTerminal(ctx, sess, b, on, spec, co)
	case b.Background:
		return t.startBackground(ctx, sess, b, on, spec), nil
	case b.Outside:
		res, render := t.foreground(ctx, sess, b, on, spec, co)
		return res, withLine(render, EscalatedLine)
	}
	return t.foreground(ctx, sess, b, on, spec, co)
}

// target is where a call runs: an executor and the kind of its tasks,
// and, for a tty call, the executor's terminals. outside: the executor
// runs commands outside the sandbox, with the user's yes for this call
// alone, so what a command leaves running is killed when it ends.
type target struct {
	ex      shell.Executor
	kind    string
	terms   shell.Terminals
	outside bool
}

// on returns the target of host (HostLocal or a configured name).
func (t *Toolset) on(host string) target {
	if host == HostLocal {
		return target{ex: t.ex, kind: kindBash}
	}
	return target{ex: t.hosts[host], kind: kindBash + "@" + host}
}

// hostArg reads the host parameter. Without configured hosts it is
// HostLocal (and a host key was refused as unknown). hostErr is a host
// that is not a string or not configured, reported after the other
// arguments' errors. A null host is not given.
func (t *Toolset) hostArg(a rawArgs) (host string, hostErr error) {
	if t.hosts == nil || !a.present("host") {
		return HostLocal, nil
	}
	if err := json.Unmarshal(a["host"], &host); err != nil {
		return HostLocal, argErr(msgHostType)
	}
	if host != HostLocal && t.hosts[host] == nil {
		return HostLocal, argErr("unknown host " + strconv.Quote(host) + "; configured hosts: " + strings.Join(t.hostNames()[1:], ", "))
	}
	return host, nil
}

// outsideArg reads outside_sandbox and justification when the deployment
// takes them (it offers them with an executor outside the sandbox, and
// takes them unlisted with a sandbox and escalation off, to say so);
// they were refused as unknown otherwise. err is a value of the wrong
// type, or a missing or blank justification for outside_sandbox true,
// reported after the other arguments' errors. null is not given.
func (t *Toolset) outsideArg(a rawArgs) (outside bool, justification string, err error) {
	if offered, hidden := t.outsideParams(); !offered && !hidden {
		return false, "", nil
	}
	if a.present(paramOutside) && json.Unmarshal(a[paramOutside], &outside) != nil {
		return false, "", argErr(msgOutsideType)
	}
	if a.present(paramJustification) && json.Unmarshal(a[paramJustification], &justification) != nil || outside && strings.TrimSpace(justification) == "" {
		return false, "", argErr(msgJustification)
	}
	return outside, justification, nil
}

// outsideParams says whether bash offers outside_sandbox and
// justification (an executor outside the sandbox is configured), or
// takes them without listing them (a sandbox runs and escalation is
// off: a model that asks is told so).
func (t *Toolset) outsideParams() (offered, hidden bool) {
	if t.opts.Unsandboxed != nil {
		return true, false
	}
	return false, t.opts.Sandbox.Enforced
}

// bashKeys are the bash parameters of this deployment in schema order,
// and those it takes without listing them (run_in_background when it is
// disabled: a model that sends it is told that, not that it is unknown).
func (t *Toolset) bashKeys() (params, hidden []string) {
	params = slices.Clone(bashParams())
	if !t.background() {
		params, hidden = slices.Clone(bashParamsNoBackground()), []string{paramBackground}
	}
	if t.terminals() != nil {
		params = append(params, paramTTY)
	}
	switch offered, unlisted := t.outsideParams(); {
	case offered:
		params = append(params, paramOutside, paramJustification)
	case unlisted:
		hidden = append(hidden, paramOutside, paramJustification)
	}
	if t.hosts != nil {
		params = append(params, "host")
	}
	return params, hidden
}

// hostNames are the values of the host parameter: "local", then the
// configured hosts in their order.
func (t *Toolset) hostNames() []string {
	names := []string{HostLocal}
	for _, h := range t.opts.Hosts {
		names = append(names, h.Name)
	}
	return names
}

func (t *Toolset) startBackground(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec) Result {
	sctx, spawnEnd := t.start(ctx, ops.PhaseSpawn)
	ev := t.taskEvents(ctx, sess, on, time.Now())
	info, err := t.opts.Tasks.Start(sess.ID, on.kind, b.Command, func() (tasks.Handle, error) {
		// A host's dial waits for its connection: the call's end ends it
		// too, as in the foreground.
		p, err := shell.Start(ctx, on.ex, spec)
		if err != nil {
			return nil, err
		}
		return t.taskHandle(p, on, time.Time{}, ev), nil
	})
	if err != nil {
		spawnEnd()
		return errorResult(taskError(err))
	}
	t.spawned(sctx, sess, on, spec, info.ID)
	spawnEnd()
	ev.named(info.ID)
	return Result{
		Text:  "started background task " + info.ID,
		Value: BackgroundValue{Kind: "background", TaskID: info.ID},
	}
}

func (t *Toolset) foreground(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec, co CallOptions) (Result, func(int) Result) {
	sctx, spawnEnd := t.start(ctx, ops.PhaseSpawn)
	// A host's dial waits for its connection: the call's end ends it too
	// (a cancelled call to an unreachable host returns at once).
	p, err := shell.Launch(ctx, on.ex, spec)
	if err != nil {
		spawnEnd()
		return errorResult(err.Error()), nil
	}
	t.spawned(sctx, sess, on, spec, "")
	spawnEnd()
	start := time.Now()
	rctx, runEnd := t.start(ctx, ops.PhaseRun)
	defer runEnd()
	moved := false // to a task, which records the process's end
	defer func() {
		if !moved && t.opts.Recorder != nil && ended(p) {
			t.processEnded(rctx, sess.ID, ops.CallIDFrom(ctx), "", hostOf(on), p.Result(), start)
		}
	}()
	var yield <-chan time.Time
	if t.yields() {
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
	live := newLiveOutput(p, p.Written, co)
	sample, stop := live.pace()
	defer stop()
	end := func() (Result, func(int) Result) {
		if on.outside {
			killLeftovers(p)
		}
		res := p.Result()
		if t.opts.Recorder != nil { // before a question about what it denied
			t.processEnded(rctx, sess.ID, ops.CallIDFrom(ctx), "", hostOf(on), res, start)
			moved = true
		}
		again, dir := t.askRerun(ctx, sess, on, b, spec, res, co)
		if live != nil {
			switch again {
			case rerunDeclined:
				live.after = DeclinedLine
			case rerunUnanswered:
				live.after = UnansweredLine
			}
			live.finish(&res, again == rerunOutside || again == rerunGranted)
		}
		switch again {
		case rerunOutside:
			out := target{ex: t.opts.Unsandboxed, kind: kindBash, outside: true}
			spec, err := out.ex.Resolve(t.request(sess, b))
			if err != nil {
				return errorResult(err.Error()), nil
			}
			return t.rerun(ctx, sess, b, out, spec, RanAgainLine, co)
		case rerunGranted:
			wider := spec
			wider.Grants = t.grants.of(sess.ID)
			return t.rerun(ctx, sess, b, on, wider, grantedLine(dir), co)
		case rerunDeclined:
			_, render := finished(p)
			return Result{}, withLine(render, DeclinedLine)
		case rerunUnanswered:
			_, render := finished(p)
			return Result{}, withLine(render, UnansweredLine)
		}
		return finished(p)
	}
	for {
		select {
		case <-p.Done():
			return end()
		case <-ctx.Done():
			if ended(p) {
				return end()
			}
			p.Kill()
			<-p.Done()
			if co.KeepAborted {
				return end()
			}
			if live != nil {
				live.finish(nil, false)
			}
			return errorResult(msgAborted), nil
		case <-sample:
			live.tick()
		case <-tick:
			o, e := p.Written()
			co.Progress(Progress{Elapsed: time.Since(start), Bytes: o + e, LastLine: lastLine(p)})
			progress.Reset(t.opts.ProgressEvery)
		case <-yield:
			// select picks at random among ready cases: a command that
			// ended while a slow progress report ran is not "still running".
			if ended(p) {
				return end()
			}
			if render, ok := t.yieldToTask(ctx, sess, b, on, spec, p, start); ok {
				moved = true
				if live != nil {
					live.finish(nil, false)
				}
				return Result{}, render
			}
			yield = nil // the session is at its task limit: stay in the foreground
		}
	}
}

// ended reports whether p (a process, a terminal) is over.
func ended(p interface{ Done() <-chan struct{} }) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// finished is the result of a foreground command that has ended.
func finished(p shell.Process) (Result, func(int) Result) {
	res := p.Result()
	return Result{}, func(budget int) Result {
		text, v := renderForeground(res, budget)
		return Result{Text: text, Value: v}
	}
}

// yieldToTask moves a running foreground command, started at start, into
// a background task. What it printed so far goes in this result; the
// task's reads carry on from there, so no byte is lost or repeated. Its
// timeout still applies, and the marker says so.
func (t *Toolset) yieldToTask(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec, p shell.Process, start time.Time) (func(int) Result, bool) {
	ev := t.taskEvents(ctx, sess, on, start)
	h := t.taskHandle(p, on, start, ev)
	info, err := t.opts.Tasks.Start(sess.ID, on.kind, b.Command, func() (tasks.Handle, error) { return h, nil })
	if err != nil {
		return nil, false
	}
	ev.named(info.ID)
	read := binaryRead(p.Read(), p)
	ms := t.opts.YieldAfter.Milliseconds()
	marker := "[still running after " + strconv.FormatInt(ms, 10) + "ms; moved to background task " + info.ID +
		" (its " + strconv.FormatInt(spec.Timeout.Milliseconds(), 10) + "ms timeout still applies)" +
		": read it with task_output, stop it with task_kill]"
	return func(budget int) Result {
		shown := readShown(read, budget, marker)
		return Result{
			Text: withMarkers(shown.body(), marker),
			Value: YieldedValue{Kind: "yielded", TaskID: info.ID, YieldedAfterMs: ms, TimeoutMs: spec.Timeout.Milliseconds(),
				Stdout: streamValue(shown.out, shown.outCut, HostPath(read.Host, read.StdoutSpill), shown.outSize, shown.outLines),
				Stderr: streamValue(shown.err, shown.errCut, HostPath(read.Host, read.StderrSpill), shown.errSize, shown.errLines)},
		}
	}, true
}
