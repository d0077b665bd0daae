//go:build linux

package acp_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/acp"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// askingExecutor stands for a provider whose network policy asks (the
// contained provider's egress, tested in internal/egress): each command
// first asks the asker lent for its owner about ask.example.test:443,
// then runs with ANSWER set to the answer ("none" when no one was lent).
type askingExecutor struct {
	*local.Executor
	mu   sync.Mutex
	lent map[string]shell.NetworkAsker
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
		answer = "error"
		if v, err := asker.AskNetwork(context.Background(), "ask.example.test", 443); err == nil {
			answer = map[shell.NetworkAnswer]string{shell.NetworkAllowOnce: "once", shell.NetworkAllowSession: "session", shell.NetworkDeny: "deny"}[v]
		}
	}
	s.Env = map[string]string{"ANSWER": answer}
	return a.Executor.Launch(s)
}

// TestNetworkPermission: a network policy's question reaches the editor
// as session/request_permission on the call, with its text and three
// options in order, and the option chosen comes back to the executor.
func TestNetworkPermission(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state := t.TempDir()
	lex, err := local.New(&local.Options{Grace: 500 * time.Millisecond, Environ: append(os.Environ(), testutil.MarkerEnv+"="+marker)})
	if err != nil {
		t.Fatal(err)
	}
	rt := tasks.New(nil)
	ts := tools.New(&askingExecutor{Executor: lex, lent: map[string]shell.NetworkAsker{}}, &tools.Options{Tasks: rt, Home: state})
	agent := acp.NewAgent(ts, &acp.AgentOptions{SessionDir: filepath.Join(state, "sessions"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, logs: &syncBuffer{}, done: make(chan error, 1), cancel: cancel, ex: lex, rt: rt}
	go func() {
		err := agent.Serve(ctx, inR, outW)
		outW.Close()
		h.done <- err
	}()
	h.cli = newClient(t, inW, outR)
	t.Cleanup(h.close)
	c := h.cli
	c.initialize(false)
	work := t.TempDir()
	sid := c.newSession(work)
	for _, ch := range []struct{ option, want string }{
		{"allow_always", "session"},
		{"allow_once", "once"},
		{"reject_once", "deny"},
	} {
		id := c.start("session/prompt", promptParams(sid, "echo $ANSWER"))
		p := asked(t, c, marker, filepath.Join(work, "none"))
		if got := p.params.ToolCall.Content[0].Content.Text; got != "Allow network access to ask.example.test for this session?" {
			t.Errorf("text %q", got)
		}
		var opts []string
		for _, o := range p.params.Options {
			opts = append(opts, o.OptionID+"/"+o.Kind+"/"+o.Name)
		}
		if got := jsonString(opts); got != `["allow_always/allow_always/Allow ask.example.test for this session","allow_once/allow_once/Allow ask.example.test:443 once","reject_once/reject_once/Deny"]` {
			t.Errorf("options %s", got)
		}
		c.respond(p.id, selected(ch.option))
		if got := resultText(t, c, id, sid); got != "```console\n"+ch.want+"\n```" {
			t.Errorf("%s: %q", ch.option, got)
		}
	}
}
