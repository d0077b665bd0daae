//go:build linux

package mcpserver_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// askingExecutor stands for a provider whose network policy asks (the
// contained provider's egress, tested in internal/egress): each command
// first asks the asker lent for its owner about ask.example.test:443,
// then runs with ANSWER set to the answer (or "none" when no one was
// lent, "error" when asking failed).
type askingExecutor struct {
	*local.Executor
	mu    sync.Mutex
	lent  map[string]shell.NetworkAsker
	asked chan struct{}
}

func (a *askingExecutor) LendNetworkAsker(owner string, asker shell.NetworkAsker) func() {
	a.mu.Lock()
	a.lent[owner] = asker
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		delete(a.lent, owner)
		a.mu.Unlock()
	}
}

func (a *askingExecutor) Launch(s shell.Spec) (shell.Process, error) {
	a.mu.Lock()
	asker := a.lent[s.Owner]
	a.mu.Unlock()
	answer := "none"
	if asker != nil {
		switch v, err := asker.AskNetwork(context.Background(), "ask.example.test", 443); {
		case err != nil:
			answer = "error"
		case v == shell.NetworkAllowOnce:
			answer = "once"
		case v == shell.NetworkAllowSession:
			answer = "session"
		default:
			answer = "deny"
		}
	}
	s.Env = map[string]string{"ANSWER": answer}
	return a.Executor.Launch(s)
}

func askingEnv(t *testing.T) *env {
	t.Helper()
	e := &env{marker: testutil.Marker(t), logs: &logBuffer{}}
	t.Cleanup(func() { testutil.AssertNoProcesses(t, e.marker) })
	lex, err := local.New(&local.Options{Environ: testutil.Env(e.marker), SpillParent: t.TempDir(), Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ex := &askingExecutor{Executor: lex, lent: map[string]shell.NetworkAsker{}}
	e.rt = tasks.New(nil)
	e.ts = tools.New(ex, &tools.Options{Tasks: e.rt, Home: t.TempDir()})
	e.srv = mcpserver.New(e.ts, &mcpserver.Options{Token: testToken, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
	t.Cleanup(func() {
		e.srv.Close()
		e.rt.Close()
		lex.Close()
	})
	return e
}

// TestNetworkQuestion: a network policy's question reaches the user as
// an elicitation form with its text and three choices, in order, and
// each answer (accept a choice, decline) comes back to the executor; a
// client without elicitation lends no asker.
func TestNetworkQuestion(t *testing.T) {
	t.Parallel()
	e := askingEnv(t)
	u := newUser()
	cs := connectUser(t, e, u)
	for _, c := range []struct {
		answer *mcp.ElicitResult
		want   string
	}{
		{accept("Allow ask.example.test for this session"), "session"},
		{accept("Allow ask.example.test:443 once"), "once"},
		{accept("Deny"), "deny"},
		{&mcp.ElicitResult{Action: "decline"}, "deny"},
	} {
		done := callAsync(t, cs, bash("echo $ANSWER"))
		var p *mcp.ElicitParams
		select {
		case p = <-u.asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the user was not asked")
		}
		if p.Message != "Allow network access to ask.example.test for this session?" {
			t.Errorf("message %q", p.Message)
		}
		choices := p.RequestedSchema.(map[string]any)["properties"].(map[string]any)["decision"].(map[string]any)["enum"]
		if got := strings.Join(toStrings(choices), "|"); got != "Allow ask.example.test for this session|Allow ask.example.test:443 once|Deny" {
			t.Errorf("choices %s", got)
		}
		u.answer <- c.answer
		wantResult(t, done, c.want+"\n", false)
	}
	// No elicitation capability: nothing is lent, no one is asked.
	wantResult(t, callAsync(t, connectUser(t, e, nil), bash("echo $ANSWER")), "none\n", false)
}
