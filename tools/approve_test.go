//go:build linux

package tools_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/tools"
)

// approver is a user answering through a test: each question is handed
// to the test, which answers on the channel.
type approver struct {
	questions chan tools.Question
	answers   chan reply
}

type reply struct {
	a   tools.Answer
	err error
}

func newApprover() *approver {
	return &approver{questions: make(chan tools.Question, 1), answers: make(chan reply, 1)}
}

func (a *approver) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	a.questions <- q
	select {
	case r := <-a.answers:
		return r.a, r.err
	case <-ctx.Done():
		return tools.Declined, ctx.Err()
	}
}

func rulesEnv(t *testing.T, timeout time.Duration) *env {
	t.Helper()
	r, err := rules.Parse([]string{"Bash(rm -rf:*)"}, []string{"Bash(touch:*)"}, []string{"Bash(true)", "Bash(ls:*)"}, "allow")
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, envOpts{tools: tools.Options{Rules: r, ApprovalTimeout: timeout}})
}

// callWith runs a bash call as sess with ap, in the background of the
// test; the result arrives on the returned channel.
func (e *env) callWith(ctx context.Context, sess tools.Session, ap tools.Approver, a map[string]any) <-chan tools.Result {
	if _, ok := a["description"]; !ok {
		a["description"] = "Run a test command"
	}
	done := make(chan tools.Result, 1)
	go func() {
		done <- e.ts.Call(ctx, sess, tools.NameBash, args(e.t, a), &tools.CallOptions{Approver: ap})
	}()
	return done
}

// pending takes the question ap is asked, and checks that nothing of the
// test's was spawned while it waits, nor the marker file made.
func (e *env) pending(ap *approver, file string) tools.Question {
	e.t.Helper()
	var q tools.Question
	select {
	case q = <-ap.questions:
	case <-time.After(10 * time.Second):
		e.t.Fatal("no question was asked")
	}
	time.Sleep(100 * time.Millisecond) // a spawn would have had time to show
	if ps := testutil.Processes(e.marker); len(ps) > 0 {
		e.t.Errorf("spawned while the question was pending: %v", ps)
	}
	noFile(e.t, file)
	return q
}

func noFile(t testing.TB, file string) {
	t.Helper()
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (or %v): the command ran", file, err)
	}
}

func result(t testing.TB, done <-chan tools.Result) tools.Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("the call never returned")
		return tools.Result{}
	}
}

func TestRulesDeny(t *testing.T) {
	e := rulesEnv(t, 0)
	file := filepath.Join(e.dir, "ran")
	for _, line := range []string{"touch " + file + " && rm -rf x", "ls $(rm -rf x; touch " + file + ")", "bash -c 'rm -rf x'"} {
		r := result(t, e.callWith(t.Context(), e.sess, newApprover(), map[string]any{"command": line}))
		wantError(t, r, "denied by rule Bash(rm -rf:*): rm -rf x")
		r = result(t, e.callWith(t.Context(), e.sess, nil, map[string]any{"command": line, "run_in_background": true}))
		wantError(t, r, "denied by rule Bash(rm -rf:*): rm -rf x")
	}
	noFile(t, file)
	if list := e.rt.List(e.sess.ID); len(list) != 0 {
		t.Errorf("tasks started: %v", list)
	}
	wantOK(t, e.bash("true"))
}

func TestRulesCannotAsk(t *testing.T) {
	e := rulesEnv(t, 0)
	file := filepath.Join(e.dir, "ran")
	for line, want := range map[string]string{
		"touch " + file:          "not run: touch " + file + " needs approval (rule Bash(touch:*)), but this client cannot ask the user; allow it in the conch configuration or run it yourself",
		"$CMD " + file:           "not run: $CMD " + file + " needs approval (dynamic command), but this client cannot ask the user; allow it in the conch configuration or run it yourself",
		"touch '" + file:         "not run: touch '" + file + " needs approval (cannot parse), but this client cannot ask the user; allow it in the conch configuration or run it yourself",
		"PATH=/x touch " + file:  "not run: touch " + file + " needs approval (assignment to PATH), but this client cannot ask the user; allow it in the conch configuration or run it yourself",
		"ls; eval touch " + file: "not run: eval touch " + file + " needs approval (dynamic command), but this client cannot ask the user; allow it in the conch configuration or run it yourself",
	} {
		wantError(t, e.bash(line), want)
	}
	noFile(t, file)
}

func TestRulesAsk(t *testing.T) {
	e := rulesEnv(t, 0)
	file := filepath.Join(e.dir, "ran")
	ap := newApprover()

	// Declined: nothing ran, then or after.
	done := e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file, "workdir": "sub/.."})
	if err := os.Mkdir(filepath.Join(e.dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	q := e.pending(ap, file)
	want := tools.Question{Command: "touch " + file, Cwd: e.dir, Subject: "touch " + file, Reason: "rule Bash(touch:*)", SessionPrefix: "touch"}
	if q.Command != want.Command || q.Subject != want.Subject || q.Reason != want.Reason || q.SessionPrefix != want.SessionPrefix || filepath.Clean(q.Cwd) != want.Cwd {
		t.Errorf("question %+v; want %+v", q, want)
	}
	ap.answers <- reply{a: tools.Declined}
	wantError(t, result(t, done), "not run: the user declined touch "+file)
	time.Sleep(100 * time.Millisecond)
	noFile(t, file)

	// Allowed once: it runs, and the next call asks again.
	done = e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file})
	e.pending(ap, file)
	ap.answers <- reply{a: tools.AllowOnce}
	wantOK(t, result(t, done))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("allowed once, but: %v", err)
	}
	done = e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file + "2"})
	e.pending(ap, file+"2")
	ap.answers <- reply{a: tools.Cancelled}
	wantError(t, result(t, done), "tool call aborted")
	noFile(t, file+"2")
}

func TestRulesAllowForSession(t *testing.T) {
	e := rulesEnv(t, 0)
	file := filepath.Join(e.dir, "ran")
	ap := newApprover()
	done := e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file})
	e.pending(ap, file)
	ap.answers <- reply{a: tools.AllowSession}
	wantOK(t, result(t, done))

	// The same session is not asked again, in the background either.
	wantOK(t, result(t, e.callWith(t.Context(), e.sess, nil, map[string]any{"command": "touch " + file + "2"})))
	id := e.background(e.sess, "touch "+file+"3")
	e.settle(e.sess, id)
	for _, f := range []string{file + "2", file + "3"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("allowed for the session, but: %v", err)
		}
	}

	// Another session is.
	other := tools.Session{ID: "session-b", Cwd: e.dir}
	done = e.callWith(t.Context(), other, ap, map[string]any{"command": "touch " + file + "4"})
	e.pending(ap, file+"4")
	ap.answers <- reply{a: tools.Declined}
	wantError(t, result(t, done), "not run: the user declined touch "+file+"4")

	// An ended session forgets.
	e.ts.EndSession(e.sess.ID)
	wantError(t, e.bash("touch "+file+"5"), "not run: touch "+file+"5 needs approval (rule Bash(touch:*)), but this client cannot ask the user; allow it in the conch configuration or run it yourself")
	noFile(t, file+"4")
	noFile(t, file+"5")
}

// A line with two asks asks twice when the first answer is "for this
// session"; a dynamic command offers no session choice.
func TestRulesAskEach(t *testing.T) {
	e := rulesEnv(t, 0)
	file := filepath.Join(e.dir, "ran")
	ap := newApprover()
	done := e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file + " && $CMD"})
	q := e.pending(ap, file)
	if q.Subject != "touch "+file || q.SessionPrefix != "touch" {
		t.Errorf("first question %+v", q)
	}
	ap.answers <- reply{a: tools.AllowSession}
	q = e.pending(ap, file)
	if q.Subject != "$CMD" || q.Reason != "dynamic command" || q.SessionPrefix != "" {
		t.Errorf("second question %+v", q)
	}
	ap.answers <- reply{a: tools.Declined}
	wantError(t, result(t, done), "not run: the user declined $CMD")
	noFile(t, file)
}

func TestRulesNoAnswer(t *testing.T) {
	e := rulesEnv(t, 300*time.Millisecond)
	file := filepath.Join(e.dir, "ran")
	ap := newApprover()

	// The question times out.
	done := e.callWith(t.Context(), e.sess, ap, map[string]any{"command": "touch " + file})
	e.pending(ap, file)
	wantError(t, result(t, done), "not run: no answer from the user")

	// The call is cancelled while the question is open.
	ctx, cancel := context.WithCancel(t.Context())
	e2 := rulesEnv(t, time.Hour)
	done = e2.callWith(ctx, e2.sess, ap, map[string]any{"command": "touch " + file, "run_in_background": true})
	e2.pending(ap, file)
	cancel()
	wantError(t, result(t, done), "not run: no answer from the user")
	time.Sleep(100 * time.Millisecond)
	noFile(t, file)
	if list := e2.rt.List(e2.sess.ID); len(list) != 0 {
		t.Errorf("tasks started: %v", list)
	}
}
