package tools

import (
	"context"
	"slices"
	"strings"

	"github.com/conch-dev/conch/shell"
)

// EscalatedLine ends the result of a command run again outside the
// sandbox with the user's yes (docs/sandbox.md): the second run's result,
// markers and all, followed by this line.
const EscalatedLine = "[ran outside the sandbox with the user's approval]"

// sandboxNotePrefix starts the markers a sandboxed provider puts in
// shell.Result.Notes.
const sandboxNotePrefix = "[sandbox: "

// escalates decides, once a foreground command on this machine has
// ended, whether it runs again outside the sandbox: only when the sandbox
// denied it something (res.Sandbox.Denied, or a sandbox marker naming no
// path), an executor without the sandbox is configured, the call can ask
// its user and is not cancelled, and the user answers "Allow once". Every
// other answer, an error and no answer within Options.ApprovalTimeout
// leave the sandboxed result as it is.
func (t *Toolset) escalates(ctx context.Context, on target, b bashArgs, spec shell.Spec, res shell.Result, co CallOptions) bool {
	if t.opts.Unsandboxed == nil || co.Approver == nil || on.kind != kindBash || ctx.Err() != nil || res.Aborted {
		return false
	}
	reason, denied := deniedBySandbox(res)
	if !denied {
		return false
	}
	q := Question{Command: b.Command, Cwd: spec.Workdir, Subject: b.Command, Reason: reason, Escalation: true}
	actx, cancel := context.WithTimeout(ctx, t.opts.ApprovalTimeout)
	defer cancel()
	a, err := co.Approver.Approve(actx, q)
	return err == nil && a == AllowOnce && ctx.Err() == nil
}

// deniedBySandbox says what the sandbox denied the command of res, as
// the reason of an escalation question: "the sandbox denied a write to
// <path>, <path>", "… network access", or "… file access (no path could
// be named)"; ok is false when it denied nothing.
func deniedBySandbox(res shell.Result) (reason string, ok bool) {
	if res.Sandbox == nil {
		return "", false
	}
	var paths []string
	network := false
	for _, d := range res.Sandbox.Denied {
		if d.Op == "network" || d.Op == "connect" && d.Path == "" {
			network = true
		} else if d.Path != "" {
			paths = append(paths, d.Path)
		}
	}
	var what []string
	if len(paths) > 0 {
		what = append(what, "a write to "+strings.Join(paths, ", "))
	}
	if network {
		what = append(what, "network access")
	}
	if len(what) == 0 {
		if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, sandboxNotePrefix) }) {
			return "", false
		}
		what = append(what, "file access (no path could be named)")
	}
	return "the sandbox denied " + strings.Join(what, " and "), true
}

// escalate runs a call's command line again on Options.Unsandboxed, in
// the foreground like the first run (progress, live output, the yield
// and cancellation apply), and returns its result followed by
// EscalatedLine. It asks no one again: a call escalates at most once.
func (t *Toolset) escalate(ctx context.Context, sess Session, b bashArgs, co CallOptions) (Result, func(int) Result) {
	spec, err := t.opts.Unsandboxed.Resolve(t.request(sess, b))
	if err != nil {
		return errorResult(err.Error()), nil
	}
	co.Approver = nil
	if out := co.Output; out != nil {
		atNewline := true // the first run's last report ended with one
		co.Output = func(data string, final bool) {
			if data != "" {
				atNewline = strings.HasSuffix(data, "\n")
			}
			if final {
				data += lineStart(atNewline) + EscalatedLine
			}
			out(data, final)
		}
	}
	res, render := t.foreground(ctx, sess, b, target{ex: t.opts.Unsandboxed, kind: kindBash}, spec, co)
	if render == nil {
		return res, nil
	}
	return res, func(budget int) Result {
		r := render(budget - len("\n"+EscalatedLine))
		r.Text = withMarkers(r.Text, EscalatedLine)
		return r
	}
}
