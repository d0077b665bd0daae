//go:build linux

package acp_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/tools"
)

// permission is a session/request_permission the agent sent.
type permission struct {
	id     json.RawMessage
	params struct {
		SessionID string `json:"sessionId"`
		ToolCall  struct {
			ToolCallID string `json:"toolCallId"`
			Content    []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		} `json:"toolCall"`
		Options []struct {
			OptionID string `json:"optionId"`
			Kind     string `json:"kind"`
			Name     string `json:"name"`
		} `json:"options"`
	}
}

// asked reads until the agent asks for permission, and checks that
// nothing was spawned nor file made while it waits for the answer.
func asked(t *testing.T, c *client, marker, file string) permission {
	t.Helper()
	for {
		m := c.recv(30 * time.Second)
		if m.Method == "session/update" {
			continue
		}
		if m.Method != "session/request_permission" {
			t.Fatalf("waiting for a permission request, got %s", m.raw)
		}
		p := permission{id: m.ID}
		if err := json.Unmarshal(m.Params, &p.params); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if ps := testutil.Processes(marker); len(ps) > 0 {
			t.Errorf("spawned while the user was asked: %v", ps)
		}
		noFile(t, file)
		return p
	}
}

func noFile(t *testing.T, file string) {
	t.Helper()
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (or %v): the command ran", file, err)
	}
}

func selected(option string) map[string]any {
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": option}}
}

// resultText is the text of a prompt's final tool_call_update.
func resultText(t *testing.T, c *client, id, sid string) string {
	t.Helper()
	_, notes := c.await(id)
	us := c.updates(notes, sid)
	last := us[len(us)-1]
	return get(get(last, "content").([]any)[0], "content", "text").(string)
}

func TestRequestPermission(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	r, err := rules.Parse([]string{"Bash(rm -rf:*)"}, []string{"Bash(touch:*)"}, nil, "allow")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	h := newHarnessTools(t, t.TempDir(), marker, tools.Options{Rules: r})
	c := h.cli
	c.initialize(false)
	sid := c.newSession(work)
	file := filepath.Join(work, "ran")

	// Rejected: nothing ran. The request names the call, says why, and
	// offers the three options.
	id := c.start("session/prompt", promptParams(sid, "touch "+file))
	p := asked(t, c, marker, file)
	if p.params.SessionID != sid || p.params.ToolCall.ToolCallID != "call-1" {
		t.Errorf("request for %s/%s", p.params.SessionID, p.params.ToolCall.ToolCallID)
	}
	if got, want := p.params.ToolCall.Content[0].Content.Text, "Allow this command to run?\n\nReason: rule Bash(touch:*)\nDirectory: "+work+"\nCommand: touch "+file; got != want {
		t.Errorf("text %q; want %q", got, want)
	}
	var opts []string
	for _, o := range p.params.Options {
		opts = append(opts, o.OptionID+"/"+o.Kind+"/"+o.Name)
	}
	if got := jsonString(opts); got != `["allow_once/allow_once/Allow once","allow_always/allow_always/Allow touch for this session","reject_once/reject_once/Deny"]` {
		t.Errorf("options %s", got)
	}
	c.respond(p.id, selected("reject_once"))
	if got := resultText(t, c, id, sid); got != "```console\nError: not run: the user declined touch "+file+"\n```" {
		t.Errorf("rejected: %q", got)
	}
	noFile(t, file)

	// The turn's cancelled outcome aborts the call.
	id = c.start("session/prompt", promptParams(sid, "touch "+file))
	p = asked(t, c, marker, file)
	c.respond(p.id, map[string]any{"outcome": map[string]any{"outcome": "cancelled"}})
	if got := resultText(t, c, id, sid); got != "```console\nError: tool call aborted\n```" {
		t.Errorf("cancelled: %q", got)
	}
	noFile(t, file)

	// Allowed once: it runs; the next one asks again.
	id = c.start("session/prompt", promptParams(sid, "touch "+file))
	p = asked(t, c, marker, file)
	c.respond(p.id, selected("allow_once"))
	c.await(id)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("allowed once: %v", err)
	}

	// Allowed for the session: not asked again there (prompt fails on a
	// request), but asked in another session.
	id = c.start("session/prompt", promptParams(sid, "touch "+file+"2"))
	p = asked(t, c, marker, file+"2")
	c.respond(p.id, selected("allow_always"))
	c.await(id)
	if stop, _ := c.prompt(sid, "touch "+file+"3"); stop != "end_turn" {
		t.Errorf("stop %q", stop)
	}
	for _, f := range []string{file + "2", file + "3"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("allowed for the session: %v", err)
		}
	}
	other := c.newSession(work)
	id = c.start("session/prompt", promptParams(other, "touch "+file+"4"))
	p = asked(t, c, marker, file+"4")
	c.respond(p.id, selected("reject_once"))
	c.await(id)
	noFile(t, file+"4")

	// A deny asks nothing.
	id = c.start("session/prompt", promptParams(sid, "rm -rf "+file))
	if got := resultText(t, c, id, sid); got != "```console\nError: denied by rule Bash(rm -rf:*): rm -rf "+file+"\n```" {
		t.Errorf("deny: %q", got)
	}
}
