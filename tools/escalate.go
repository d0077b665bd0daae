package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/conch-dev/conch/shell"
)

// Lines that end the result of a command the sandbox denied something
// after the user was asked (docs/sandbox.md#escalation), and of one the
// model asked to run outside it. Each follows all the result's markers,
// the exit marker included.
const (
	// EscalatedLine ends the result of a command that ran outside the
	// sandbox because the model asked (outside_sandbox) and the user said
	// yes.
	EscalatedLine = "[ran outside the sandbox with the user's approval]"
	// RanAgainLine ends the result of a command run again outside the
	// sandbox after a denial, with the user's yes: the second run's.
	RanAgainLine = "[ran again outside the sandbox with the user's approval]"
	// DeclinedLine ends the sandboxed result the user chose to keep.
	DeclinedLine = "[the user declined to run it outside the sandbox]"
	// UnansweredLine ends the sandboxed result when the question got no
	// answer: the client dismissed it without showing anyone (MCP's
	// cancel), or no answer came.
	UnansweredLine = "[the question was not answered]"
)

// grantedLine ends the result of a command run again with dir granted
// for the session: the second run's.
func grantedLine(dir string) string {
	return "[ran again with writes to " + Shown(dir) + " allowed for this session]"
}

// Texts of a bash call with outside_sandbox (tool errors).
const (
	msgOutsideOff        = "not run: running outside the sandbox needs the user's approval, and escalation is off"
	msgOutsideCannotAsk  = "not run: running outside the sandbox needs the user's approval, and this client cannot ask"
	msgOutsideDeclined   = "not run: the user declined to run it outside the sandbox"
	msgOutsideTTY        = "outside_sandbox is not available with tty"
	msgOutsideHostPrefix = "outside_sandbox is not available on host "
)

// maxGrants bounds the directories one session may be granted: each
// starts the session's commands in a new init.
const maxGrants = 8

// rerun is what the user chose after the sandbox denied a command.
type rerun int

const (
	rerunNone       rerun = iota // not asked: the result stands as it is
	rerunDeclined                // the user said no
	rerunUnanswered              // no answer
	rerunOutside                 // run it again outside the sandbox
	rerunGranted                 // run it again with a directory granted for the session
)

// askRerun decides, once a foreground command on this machine has ended,
// whether it runs again: only when the sandbox denied it something
// (res.Sandbox.Denied: what the sandbox recorded, never what the command
// printed, docs/sandbox.md#escalation), an executor without the sandbox
// is configured, the call can ask its user and is not cancelled. The
// user may allow it once outside the sandbox or, when every denial was a
// write that one directory other than the home covers, allow writes to
// that directory for the rest of the session (dir; the grant is
// recorded). n is the narrowing the command ran under.
func (t *Toolset) askRerun(ctx context.Context, sess Session, on target, b bashArgs, spec shell.Spec, res shell.Result, co CallOptions) (r rerun, dir string) {
	if t.opts.Unsandboxed == nil || co.Approver == nil || on.kind != kindBash || on.outside || ctx.Err() != nil || res.Aborted {
		return rerunNone, ""
	}
	reason, denied := deniedBySandbox(res)
	if !denied {
		return rerunNone, ""
	}
	q := Question{Kind: AskRerun, Command: b.Command, Cwd: spec.Workdir, Subject: b.Command, Reason: reason,
		Grant: t.grantFor(sess, spec, res)}
	a, err := t.ask(ctx, sess, co.Approver, q, "escalation", b.Command)
	switch {
	case ctx.Err() != nil:
		return rerunNone, ""
	case err != nil, a == Unanswered, a == Cancelled:
		return rerunUnanswered, ""
	case a == AllowOnce:
		t.grant(ctx, sess, "outside_sandbox", b.Command, "once")
		return rerunOutside, ""
	case a == AllowSession && q.Grant != "" && t.grants.add(sess.ID, q.Grant):
		t.grant(ctx, sess, "writable_root", q.Grant, "session")
		return rerunGranted, q.Grant
	}
	return rerunDeclined, ""
}

// deniedBySandbox says what the sandbox denied the command of res, as
// the reason of a question: "the sandbox denied a write to <path>,
// <path>", "… a read of <path>", "… network access", joined by " and ";
// ok is false when it recorded nothing.
func deniedBySandbox(res shell.Result) (reason string, ok bool) {
	if res.Sandbox == nil || len(res.Sandbox.Denied) == 0 {
		return "", false
	}
	var (
		order []string
		paths = map[string][]string{}
	)
	for _, d := range res.Sandbox.Denied {
		what := d.Op
		switch {
		case d.Op == "write" && d.Path != "":
			what = "a write to "
		case d.Op == "read" && d.Path != "":
			what = "a read of "
		case d.Op == "network" || d.Op == "connect" && d.Path == "":
			what = "network access"
		case d.Path != "":
			what = "a " + d.Op + " of "
		}
		if !slices.Contains(order, what) {
			order = append(order, what)
		}
		if strings.HasSuffix(what, " ") && !slices.Contains(paths[what], d.Path) {
			paths[what] = append(paths[what], d.Path)
		}
	}
	parts := make([]string, 0, len(order))
	for _, what := range order {
		parts = append(parts, what+strings.Join(paths[what], ", "))
	}
	return "the sandbox denied " + strings.Join(parts, " and "), true
}

// grantFor is the directory "Allow writes to <dir> for this session"
// would grant after the denials of res, or "" when no grant would let
// the command through or may be offered: the smallest directory holding
// every path denied a write (the nearest existing directory of each),
// when every denial is a write, the session's sandbox is workspace-write,
// the directory is not the root, the home directory or one above it, nor
// inside a directory commands may already write (there a denial is of a
// protected path, which no grant lifts), and the session has room for
// one more grant.
func (t *Toolset) grantFor(sess Session, spec shell.Spec, res shell.Result) string {
	mode := t.opts.Sandbox.Mode
	if n := spec.Narrowing; n != nil && n.Mode != "" {
		mode = n.Mode
	}
	fsys, ok := t.ex.(shell.FileSystem)
	if mode != "" && mode != "workspace-write" || !ok || len(t.grants.of(sess.ID)) >= maxGrants {
		return ""
	}
	var dir string
	for _, d := range res.Sandbox.Denied {
		if d.Op != "write" || !filepath.IsAbs(d.Path) {
			return ""
		}
		near := nearestDir(fsys, filepath.Clean(d.Path))
		if near == "" {
			return ""
		}
		if dir == "" {
			dir = near
		} else {
			dir = commonDir(dir, near)
		}
	}
	home, err := fsys.Home()
	if err != nil || dir == "" || dir == "/" || within(home, dir) {
		return ""
	}
	writable := append([]string{sess.Cwd, spec.Workspace}, t.opts.Sandbox.Writable...)
	writable = append(writable, t.grants.of(sess.ID)...)
	for _, w := range writable {
		if w != "" && within(dir, w) {
			return ""
		}
	}
	return dir
}

// nearestDir is path if it is an existing directory, else its nearest
// existing parent directory (real paths, as fsys resolves them); "" when
// none can be told.
func nearestDir(fsys shell.FileSystem, path string) string {
	for p := path; ; p = filepath.Dir(p) {
		real, err := fsys.Dir(p)
		if err == nil {
			return real
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, shell.ErrNotDir) || p == "/" {
			return ""
		}
	}
}

// commonDir is the deepest directory holding both a and b.
func commonDir(a, b string) string {
	for !within(b, a) {
		a = filepath.Dir(a)
	}
	return a
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// grants are the directories each session's user let its commands write
// for the rest of the session (docs/sandbox.md#escalation).
type grants struct {
	mu   sync.Mutex
	dirs map[string][]string
}

func (g *grants) of(session string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.dirs[session])
}

// add grants dir to session; false when the session has too many.
func (g *grants) add(session, dir string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dirs == nil {
		g.dirs = map[string][]string{}
	}
	if slices.Contains(g.dirs[session], dir) {
		return true
	}
	if len(g.dirs[session]) >= maxGrants {
		return false
	}
	g.dirs[session] = append(g.dirs[session], dir)
	return true
}

func (g *grants) forget(session string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.dirs, session)
}

// askOutside asks the user whether a command the model wants outside
// the sandbox (outside_sandbox) may run there; nil when it may, else the
// call's error result. Nothing has run yet.
func (t *Toolset) askOutside(ctx context.Context, sess Session, b bashArgs, cwd string, co CallOptions) *Result {
	switch {
	case t.opts.Unsandboxed == nil:
		return failure(msgOutsideOff)
	case co.Approver == nil:
		return failure(msgOutsideCannotAsk)
	}
	q := Question{Kind: AskOutside, Command: b.Command, Cwd: cwd, Subject: b.Command, Reason: b.Justification}
	a, err := t.ask(ctx, sess, co.Approver, q, "outside_sandbox", b.Command)
	switch {
	case err != nil:
		return failure(msgNoAnswer)
	case a == AllowOnce:
		t.grant(ctx, sess, "outside_sandbox", b.Command, "once")
		return nil
	case a == Cancelled:
		return failure(msgAborted)
	case a == Unanswered:
		return failure(fmt.Sprintf(msgUnansweredFmt, b.Command))
	}
	return failure(msgOutsideDeclined)
}

// rerun runs a call's command line again on on, in the foreground like
// the first run (progress, live output, the yield and cancellation
// apply), and returns its result followed by line. It asks no one again:
// a call is asked at most once after a denial.
func (t *Toolset) rerun(ctx context.Context, sess Session, b bashArgs, on target, spec shell.Spec, line string, co CallOptions) (Result, func(int) Result) {
	co.Approver = nil
	if out := co.Output; out != nil {
		atNewline := true // the first run's last report ended with one
		co.Output = func(data string, final bool) {
			if data != "" {
				atNewline = strings.HasSuffix(data, "\n")
			}
			if final {
				data += lineStart(atNewline) + line
			}
			out(data, final)
		}
	}
	res, render := t.foreground(ctx, sess, b, on, spec, co)
	return res, withLine(render, line)
}

// withLine makes render's texts end with line, after every marker.
func withLine(render func(int) Result, line string) func(int) Result {
	if render == nil {
		return nil
	}
	return func(budget int) Result {
		r := render(budget - len("\n"+line))
		r.Text = withMarkers(r.Text, line)
		return r
	}
}

// killLeftovers ends what a command that ran outside the sandbox left
// running, once it has ended: what the user allowed was that command,
// not a helper that later sandboxed commands could drive
// (docs/sandbox.md#escalation).
func killLeftovers(p shell.Process) {
	if lo, ok := p.(shell.Leftovers); ok {
		lo.KillLeftovers()
	}
}
