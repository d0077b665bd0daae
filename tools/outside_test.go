//go:build linux

package tools_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// TestSandboxDescriptions pins the bash description's paragraph on the
// sandbox and the environment (docs/tools.md#description) for each kind
// of deployment, and the parameters it offers: outside_sandbox and
// justification with an executor outside the sandbox, none without.
func TestSandboxDescriptions(t *testing.T) {
	t.Parallel()
	outside := newEnv(t, envOpts{}) // any executor will do as the one outside
	writable := []string{"/tmp", "/home/u/.cache", "/srv/shared"}
	scrubbed := []string{"DATABASE_URL", "GITHUB_TOKEN", "OPENAI_API_KEY"}
	var b strings.Builder
	for _, c := range []struct {
		name string
		o    tools.Options
	}{
		{"workspace-write, escalation ask", tools.Options{Unsandboxed: outside.ex, Scrubbed: scrubbed,
			Sandbox: tools.Sandbox{Mode: "workspace-write", Network: "on", Enforced: true, Writable: writable}}},
		{"workspace-write, network off, escalation never", tools.Options{
			Sandbox: tools.Sandbox{Mode: "workspace-write", Network: "off", Enforced: true, Writable: writable}}},
		{"read-only", tools.Options{Unsandboxed: outside.ex,
			Sandbox: tools.Sandbox{Mode: "read-only", Network: "on", Enforced: true, Writable: []string{"/tmp"}}}},
		{"no sandbox, scrubbed names", tools.Options{Scrubbed: scrubbed}},
		{"no sandbox", tools.Options{}},
	} {
		e := newEnv(t, envOpts{tools: c.o, noTasks: true})
		bash := e.ts.Tools()[0]
		desc := bash.Description
		if i := strings.Index(desc, "\n\n"); i >= 0 {
			desc = desc[i+2:]
		} else {
			desc = "(nothing)"
		}
		b.WriteString("== " + c.name + "\n" + desc + "\nparameters: " + strings.Join(params(t, bash.InputSchema), ", ") + "\n")
	}
	golden(t, "descriptions", b.String())
}

// params are the properties of an input schema, in order.
func params(t *testing.T, schema []byte) []string {
	t.Helper()
	var out []string
	s := string(schema)
	for _, p := range []string{"command", "description", "timeoutMs", "workdir", "run_in_background", "tty", "outside_sandbox", "justification", "host"} {
		if strings.Contains(s, `"`+p+`":{`) {
			out = append(out, p)
		}
	}
	return out
}

// answerer is an Approver that answers every question with answer and
// records them.
type answerer struct {
	answer tools.Answer
	mu     sync.Mutex
	asked  []tools.Question
}

func (a *answerer) Approve(_ context.Context, q tools.Question) (tools.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, q)
	return a.answer, nil
}

func (a *answerer) questions() []tools.Question {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asked
}

// TestOutsideSandboxArgs: outside_sandbox and justification are checked
// in the order of docs/tools.md#validation; a deployment with escalation
// off takes them unlisted and says so; the run outside asks first, runs
// only on a yes, and says so; each other answer runs nothing.
func TestOutsideSandboxArgs(t *testing.T) {
	t.Parallel()
	other := newEnv(t, envOpts{})
	sb := tools.Sandbox{Mode: "workspace-write", Enforced: true}
	ask := newEnv(t, envOpts{tools: tools.Options{Unsandboxed: other.ex, Sandbox: sb}})
	never := newEnv(t, envOpts{tools: tools.Options{Sandbox: sb}})
	none := newEnv(t, envOpts{})
	call := func(e *env, a map[string]any, ap tools.Approver) tools.Result {
		t.Helper()
		a["description"] = "Run a test command"
		return e.ts.Call(t.Context(), e.sess, tools.NameBash, args(t, a), &tools.CallOptions{Approver: ap})
	}
	yes := &answerer{answer: tools.AllowOnce}
	for _, c := range []struct {
		name string
		e    *env
		args map[string]any
		ap   tools.Approver
		want string
	}{
		{"not a boolean", ask, map[string]any{"command": "true", "outside_sandbox": "yes", "justification": "x"}, yes, "Error: invalid outside_sandbox: expected a boolean"},
		{"no justification", ask, map[string]any{"command": "true", "outside_sandbox": true}, yes, "Error: invalid justification: expected a non-empty string"},
		{"blank justification", ask, map[string]any{"command": "true", "outside_sandbox": true, "justification": "  "}, yes, "Error: invalid justification: expected a non-empty string"},
		{"justification not a string", ask, map[string]any{"command": "true", "outside_sandbox": true, "justification": 3}, yes, "Error: invalid justification: expected a non-empty string"},
		{"command first", ask, map[string]any{"command": "", "outside_sandbox": 1}, yes, "Error: invalid command: expected a non-empty string"},
		{"no one to ask", ask, map[string]any{"command": "true", "outside_sandbox": true, "justification": "x"}, nil,
			"Error: not run: running outside the sandbox needs the user's approval, and this client cannot ask"},
		{"escalation off", never, map[string]any{"command": "true", "outside_sandbox": true, "justification": "x"}, yes,
			"Error: not run: running outside the sandbox needs the user's approval, and escalation is off"},
		{"no sandbox", none, map[string]any{"command": "true", "outside_sandbox": true}, yes,
			`Error: invalid arguments: unknown parameter "outside_sandbox"; bash takes command, description, timeoutMs, workdir, run_in_background, tty`},
		{"outside false", ask, map[string]any{"command": "echo in", "outside_sandbox": false}, yes, "in\n"},
		{"declined", ask, map[string]any{"command": "echo ran", "outside_sandbox": true, "justification": "x"}, &answerer{answer: tools.Declined},
			"Error: not run: the user declined to run it outside the sandbox"},
		{"cancel", ask, map[string]any{"command": "echo ran", "outside_sandbox": true, "justification": "x"}, &answerer{answer: tools.Unanswered},
			"Error: not run: the question was not answered (cancel); echo ran"},
		{"acp cancelled", ask, map[string]any{"command": "echo ran", "outside_sandbox": true, "justification": "x"}, &answerer{answer: tools.Cancelled},
			"Error: tool call aborted"},
		{"yes", ask, map[string]any{"command": "echo ran; exit 2", "outside_sandbox": true, "justification": "list containers"}, yes,
			"ran\n[exit code: 2]\n[ran outside the sandbox with the user's approval]"},
	} {
		if got := call(c.e, c.args, c.ap).Text; got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	q := yes.questions()
	if len(q) != 1 || q[0].Kind != tools.AskOutside || q[0].Reason != "list containers" || q[0].Command != "echo ran; exit 2" || q[0].Cwd != ask.dir {
		t.Errorf("questions %+v, want one: the yes's", q)
	}
	for _, name := range []string{"outside_sandbox", "justification"} {
		if s := string(never.ts.Tools()[0].InputSchema); strings.Contains(s, name) {
			t.Errorf("escalation off lists %s: %s", name, s)
		}
	}

	// In the background too: the task runs on the executor outside, and
	// settles once what it left running is gone.
	r := call(ask, map[string]any{"command": "sleep 1081 >/dev/null 2>&1 & echo bg", "outside_sandbox": true, "justification": "x", "run_in_background": true}, yes)
	v, ok := r.Value.(tools.BackgroundValue)
	if !ok {
		t.Fatalf("background outside the sandbox: %q", r.Text)
	}
	ask.settle(ask.sess, v.TaskID)
	if n := len(testutil.Processes(other.marker)); n != 0 {
		t.Errorf("%d processes of the task outside the sandbox left after it settled, want 0", n)
	}
	if got := call(ask, map[string]any{"command": "true"}, nil); got.IsError {
		t.Errorf("a sandboxed call after: %q", got.Text)
	}
	out := ask.ts.Call(t.Context(), ask.sess, tools.NameTaskOutput, args(t, map[string]any{"task_id": v.TaskID}), nil)
	if out.Text != "bg\n[status: completed, exit code: 0]" {
		t.Errorf("task_output: %q", out.Text)
	}
}
