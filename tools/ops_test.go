//go:build linux

package tools_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/tools"
)

// events is an ops.Recorder that keeps what it is handed, each event as
// one line of its kind and the fields a test compares.
type events struct {
	mu    sync.Mutex
	lines []string
	all   []ops.Event
}

func (r *events) Record(_ context.Context, e ops.Event) {
	var s string
	switch e := e.(type) {
	case ops.Call:
		s = fmt.Sprintf("call %s %q host=%q bg=%v task=%q", e.Tool, e.Command, e.Host, e.Background, e.Task)
		if e.TTY {
			s += " tty"
		}
	case ops.Decision:
		s = fmt.Sprintf("decision %s rule=%q command=%q reason=%q", e.Decision, e.Rule, e.Command, e.Reason)
	case ops.Question:
		s = fmt.Sprintf("question %s %q", e.Kind, e.Subject)
	case ops.Answer:
		s = fmt.Sprintf("answer %s %s by %s", e.Kind, e.Choice, e.AnsweredBy)
	case ops.Grant:
		s = fmt.Sprintf("grant %s %q %s", e.Kind, e.Subject, e.Scope)
	case ops.Spawn:
		s = fmt.Sprintf("spawn task=%q sandbox=%s", e.Task, e.Sandbox)
	case ops.Process:
		s = fmt.Sprintf("process task=%q exit=%d signal=%q bytes=%d", e.Task, e.ExitCode, e.Signal, e.OutputBytes)
	case ops.Kill:
		s = fmt.Sprintf("kill %s %s", e.Task, e.Reason)
	case ops.CallEnd:
		s = fmt.Sprintf("end %s %s", e.Tool, e.Result)
	default:
		s = string(e.EventKind())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, s)
	r.all = append(r.all, e)
}

// take returns the lines recorded since the last take.
func (r *events) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func (r *events) wantLines(t *testing.T, what string, want ...string) {
	t.Helper()
	if got := r.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s: events\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fixed answers every question with a.
type fixed struct{ a tools.Answer }

func (f fixed) Approve(context.Context, tools.Question) (tools.Answer, error) { return f.a, nil }

// TestRecordedEvents: every kind of call reports its events to the
// recorder, in order, all with the call's id and the session as owner:
// a command's call, decision, spawn, process and end; a rule's deny; a
// rule's question with each answer (a person's, the client's cancel) and
// the session grant; a background task's spawn and, at its kill, the
// kill and its process's end; the kill of a task still running when its
// session ends.
func TestRecordedEvents(t *testing.T) {
	t.Parallel()
	r, err := rules.Parse([]string{"Bash(rm -rf:*)"}, []string{"Bash(touch:*)"}, nil, "allow")
	if err != nil {
		t.Fatal(err)
	}
	rec := &events{}
	e := newEnv(t, envOpts{tools: tools.Options{Rules: r, Recorder: rec}})
	ctx := t.Context()
	call := func(ap tools.Approver, a map[string]any) tools.Result {
		a["description"] = "Run a test command"
		return e.ts.Call(ctx, e.sess, tools.NameBash, args(t, a), &tools.CallOptions{Approver: ap})
	}

	wantOK(t, call(nil, map[string]any{"command": "echo hi"}))
	rec.wantLines(t, "echo hi",
		`call bash "echo hi" host="" bg=false task=""`,
		`decision allow rule="" command="echo hi" reason="no rule matches"`,
		`spawn task="" sandbox=none`,
		`process task="" exit=0 signal="" bytes=3`,
		`end bash ok`)

	call(nil, map[string]any{"command": "exit 3"})
	rec.wantLines(t, "exit 3",
		`call bash "exit 3" host="" bg=false task=""`,
		`decision allow rule="" command="exit 3" reason="no rule matches"`,
		`spawn task="" sandbox=none`,
		`process task="" exit=3 signal="" bytes=0`,
		`end bash error`)

	wantOK(t, call(nil, map[string]any{"command": "printf tty", "tty": true}))
	rec.wantLines(t, "a tty call",
		`call bash "printf tty" host="" bg=false task="" tty`,
		`decision allow rule="" command="printf tty" reason="no rule matches"`,
		`spawn task="" sandbox=none`,
		`process task="" exit=0 signal="" bytes=3`,
		`end bash ok`)

	wantError(t, call(nil, map[string]any{"command": "rm -rf /nothing"}), "denied by rule Bash(rm -rf:*): rm -rf /nothing")
	rec.wantLines(t, "a rule's deny",
		`call bash "rm -rf /nothing" host="" bg=false task=""`,
		`decision deny rule="Bash(rm -rf:*)" command="rm -rf /nothing" reason=""`,
		`end bash denied`)

	call(fixed{tools.Unanswered}, map[string]any{"command": "touch a"})
	rec.wantLines(t, "a question the client cancels",
		`call bash "touch a" host="" bg=false task=""`,
		`decision ask rule="Bash(touch:*)" command="touch a" reason=""`,
		`question rule "touch a"`,
		`answer rule cancel by client`,
		`end bash denied`)

	// A question the approval timeout ends, and one withdrawn by the
	// call's cancellation.
	short := tools.New(e.ex, &tools.Options{Rules: r, Recorder: rec, ApprovalTimeout: time.Millisecond})
	short.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{"command": "touch a", "description": "x"}), &tools.CallOptions{Approver: newApprover()})
	rec.wantLines(t, "a question that times out",
		`call bash "touch a" host="" bg=false task=""`,
		`decision ask rule="Bash(touch:*)" command="touch a" reason=""`,
		`question rule "touch a"`,
		`answer rule timeout by client`,
		`end bash denied`)
	cctx, cancel := context.WithCancel(ctx)
	ap := newApprover()
	go func() { <-ap.questions; cancel() }()
	e.ts.Call(cctx, e.sess, tools.NameBash, args(t, map[string]any{"command": "touch a", "description": "x"}), &tools.CallOptions{Approver: ap})
	rec.wantLines(t, "a question withdrawn",
		`call bash "touch a" host="" bg=false task=""`,
		`decision ask rule="Bash(touch:*)" command="touch a" reason=""`,
		`question rule "touch a"`,
		`answer rule cancel by client`,
		`end bash denied`)

	call(fixed{tools.Declined}, map[string]any{"command": "touch a"})
	rec.wantLines(t, "a question the user declines",
		`call bash "touch a" host="" bg=false task=""`,
		`decision ask rule="Bash(touch:*)" command="touch a" reason=""`,
		`question rule "touch a"`,
		`answer rule deny by user`,
		`end bash denied`)

	wantOK(t, call(fixed{tools.AllowSession}, map[string]any{"command": "touch a"}))
	rec.wantLines(t, "allowed for the session",
		`call bash "touch a" host="" bg=false task=""`,
		`decision ask rule="Bash(touch:*)" command="touch a" reason=""`,
		`question rule "touch a"`,
		`answer rule allow_session by user`,
		`grant rule "touch" session`,
		`decision allow rule="Bash(touch:*)" command="touch a" reason=""`,
		`spawn task="" sandbox=none`,
		`process task="" exit=0 signal="" bytes=0`,
		`end bash ok`)

	id := e.background(e.sess, "sleep 600")
	rec.wantLines(t, "a background task",
		`call bash "sleep 600" host="" bg=true task=""`,
		`decision allow rule="" command="sleep 600" reason="no rule matches"`,
		`spawn task="`+id+`" sandbox=none`,
		`end bash background`)
	e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	// The process's end is recorded when the runtime settles the task,
	// which may follow task_kill's result.
	testutil.WaitFor(t, 10*time.Second, "the killed task's process event", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.lines) == 4
	})
	got := rec.take()
	want := []string{
		`call task_kill "" host="" bg=false task="` + id + `"`,
		`kill ` + id + ` task_kill`,
		`process task="` + id + `" exit=0 signal="SIGTERM" bytes=0`,
		`end task_kill ok`,
	}
	if got[3] != want[3] { // the process may end before or after the call
		got[2], got[3] = got[3], got[2]
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("task_kill: events\n%s\nwant (process and end in either order)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	id = e.background(e.sess, "sleep 600")
	rec.take()
	e.ts.EndSession(e.sess.ID)
	got = rec.take()
	want = []string{`kill ` + id + ` session_end`, `process task="` + id + `" exit=0 signal="SIGTERM" bytes=0`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("session end: events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	ids := map[string]bool{}
	for _, ev := range rec.all {
		if ops.Owner(ev) != e.sess.ID {
			t.Errorf("%T owned by %q, want %q", ev, ops.Owner(ev), e.sess.ID)
		}
		if c, ok := ev.(ops.Call); ok {
			if c.CallID == "" || ids[c.CallID] {
				t.Errorf("call id %q: empty or repeated", c.CallID)
			}
			ids[c.CallID] = true
		}
	}
}

// TestRecordedOutsideSandbox: a call the model asks to run outside the
// sandbox records its question, the user's answer and the one-run grant,
// then a process whose sandbox is "outside"; a declined one stops at the
// answer.
func TestRecordedOutsideSandbox(t *testing.T) {
	t.Parallel()
	other := newEnv(t, envOpts{})
	rec := &events{}
	e := newEnv(t, envOpts{tools: tools.Options{Unsandboxed: other.ex, Recorder: rec,
		Sandbox: tools.Sandbox{Mode: "workspace-write", Enforced: true}}})
	call := func(ap tools.Approver) {
		a := map[string]any{"command": "echo out", "description": "x", "outside_sandbox": true, "justification": "needs docker"}
		e.ts.Call(t.Context(), e.sess, tools.NameBash, args(t, a), &tools.CallOptions{Approver: ap})
	}
	call(fixed{tools.AllowOnce})
	rec.wantLines(t, "allowed once",
		`call bash "echo out" host="" bg=false task=""`,
		`question outside_sandbox "echo out"`,
		`answer outside_sandbox allow_once by user`,
		`grant outside_sandbox "echo out" once`,
		`spawn task="" sandbox=outside`,
		`process task="" exit=0 signal="" bytes=4`,
		`end bash ok`)
	call(fixed{tools.Declined})
	rec.wantLines(t, "declined",
		`call bash "echo out" host="" bg=false task=""`,
		`question outside_sandbox "echo out"`,
		`answer outside_sandbox deny by user`,
		`end bash denied`)
}
