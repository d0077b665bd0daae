//go:build linux

package acp_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// The lines a result ends with after the question about it
// (docs/sandbox.md#escalation).
const (
	ranAgainLine   = "[ran again outside the sandbox with the user's approval]"
	declinedLine   = "[the user declined to run it outside the sandbox]"
	unansweredLine = "[the question was not answered]"
)

// TestEscalation: under conch acp --sandbox workspace-write, a command
// whose write to the home the sandbox denied is run again outside it
// only when the editor's user answers allow_once to
// session/request_permission (which offers allow_once and reject_once
// alone: the home is never offered for the session); after reject_once
// or a cancelled outcome the sandboxed result stands, with a line that
// says which. A terminal card shows both runs, and the pill the second
// one's exit.
func TestEscalation(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	// Outside /tmp, which workspace-write leaves writable.
	base, err := os.MkdirTemp("/var/tmp", "conch-acp-escalate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, work := filepath.Join(base, "home"), filepath.Join(base, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := startConch(t, t.TempDir(), work, marker, []string{"HOME=" + home}, "--sandbox", "workspace-write")
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)
	runs := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(work, "runs-"+name))
		return strings.Count(string(b), "\n")
	}
	file := func(name string) string { return filepath.Join(home, "outside-"+name) }
	wrote := func(name string) bool {
		_, err := os.Stat(file(name))
		return !errors.Is(err, os.ErrNotExist)
	}

	for i, answer := range []map[string]any{selected("allow_once"), selected("reject_once"), {"outcome": map[string]any{"outcome": "cancelled"}}} {
		name := []string{"allowed", "rejected", "cancelled"}[i]
		command := "echo run >> runs-" + name + "; echo x > ~/outside-" + name
		id := c.start("session/prompt", promptParams(sid, command))
		req, notes := awaitPermission(t, c)
		time.Sleep(100 * time.Millisecond) // a second run that did not wait would show
		if runs(name) != 1 || wrote(name) {
			t.Errorf("%s: while the user is asked: %d runs, file written %v; want one run, no file", name, runs(name), wrote(name))
		}
		wantText := "Run this command again outside the sandbox?\n\nReason: the sandbox denied a write to " + file(name) +
			"\nDirectory: " + work + "\nCommand: " + command + "\n\nThe command runs again in full; what it did the first time stays done."
		if got := req.params.ToolCall.Content[0].Content.Text; req.params.ToolCall.ToolCallID == "" || got != wantText {
			t.Errorf("%s: request %q for %q; want %q", name, got, req.params.ToolCall.ToolCallID, wantText)
		}
		var opts []string
		for _, o := range req.params.Options {
			opts = append(opts, o.OptionID+"/"+o.Kind+"/"+o.Name)
		}
		if d := cmp.Diff([]string{"allow_once/allow_once/Allow once", "reject_once/reject_once/Deny"}, opts); d != "" {
			t.Errorf("%s: options (-want +got):\n%s", name, d)
		}
		c.respond(req.id, answer)
		res, more := c.await(id)
		if !strings.Contains(string(res.Result), `"stopReason":"end_turn"`) {
			t.Errorf("%s: prompt ended %s", name, res.raw)
		}
		card := cardOf(t, c.updates(append(notes, more...), sid), req.params.ToolCall.ToolCallID)
		denied := "bash: line 1: " + file(name) + ": Permission denied\n[sandbox: write to " + file(name) + " denied under workspace-write mode; writable: " + work + ", "
		exit := get(card.final, "_meta", "terminal_exit", "exit_code")
		if name == "allowed" {
			if runs(name) != 2 || !wrote(name) {
				t.Errorf("allowed: %d runs, file written %v; want two runs and the file", runs(name), wrote(name))
			}
			// The card: the first run with its exit, then the second's
			// output (none) and the line; the pill is the second run's.
			if !strings.HasPrefix(card.data, denied) || !strings.HasSuffix(card.data, "]\n[exit code: 1]\n"+ranAgainLine) || exit != float64(0) {
				t.Errorf("allowed: card %q, exit %v", card.data, exit)
			}
			continue
		}
		if runs(name) != 1 || wrote(name) {
			t.Errorf("%s: %d runs, file written %v; want one run, no file", name, runs(name), wrote(name))
		}
		line := map[string]string{"rejected": declinedLine, "cancelled": unansweredLine}[name]
		if !strings.HasPrefix(card.data, denied) || !strings.HasSuffix(card.data, "]\n"+line) || exit != float64(1) {
			t.Errorf("%s: card %q, exit %v; want the sandboxed result, then %q", name, card.data, exit, line)
		}
	}
	p.eof(marker)
}

// TestEscalationGrantACP: a write the sandbox denied in a sibling of the
// session's cwd is offered for the session as allow_always ("Allow writes
// to <dir> for this session"); choosing it runs the command again in the
// sandbox with the directory writable, the card ending with the grant's
// line, and the session's next write there asks nothing.
func TestEscalationGrantACP(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	base, err := os.MkdirTemp("/var/tmp", "conch-acp-grant-") // outside /tmp, which stays writable
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, work, sib := filepath.Join(base, "home"), filepath.Join(base, "work"), filepath.Join(base, "sib")
	for _, d := range []string{home, work, sib} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := startConch(t, t.TempDir(), work, marker, []string{"HOME=" + home}, "--sandbox", "workspace-write")
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)
	command := "echo x > " + filepath.Join(sib, "a") + " && echo wrote"
	id := c.start("session/prompt", promptParams(sid, command))
	req, notes := awaitPermission(t, c)
	var opts []string
	for _, o := range req.params.Options {
		opts = append(opts, o.OptionID+"/"+o.Kind+"/"+o.Name)
	}
	grant := "allow_always/allow_always/Allow writes to " + sib + " for this session"
	if d := cmp.Diff([]string{"allow_once/allow_once/Allow once", grant, "reject_once/reject_once/Deny"}, opts); d != "" {
		t.Errorf("options (-want +got):\n%s", d)
	}
	c.respond(req.id, selected("allow_always"))
	_, more := c.await(id)
	card := cardOf(t, c.updates(append(notes, more...), sid), req.params.ToolCall.ToolCallID)
	if !strings.HasSuffix(card.data, "wrote\n[ran again with writes to "+sib+" allowed for this session]") ||
		get(card.final, "_meta", "terminal_exit", "exit_code") != float64(0) {
		t.Errorf("card %q, final %v", card.data, card.final)
	}
	if _, err := os.Stat(filepath.Join(sib, "a")); err != nil {
		t.Errorf("the granted write: %v", err)
	}
	// The session's next write there asks nothing (await fails on a
	// permission request).
	c.await(c.start("session/prompt", promptParams(sid, "echo y > "+filepath.Join(sib, "b")+" && echo again")))
	if _, err := os.Stat(filepath.Join(sib, "b")); err != nil {
		t.Errorf("the session's next write in the granted directory: %v", err)
	}
	p.eof(marker)
}

// awaitPermission reads the agent's messages up to its next permission
// request, and returns it and the session updates that came before.
func awaitPermission(t *testing.T, c *client) (permission, []message) {
	t.Helper()
	var notes []message
	var req permission
	for req.id == nil {
		m := c.recv(30 * time.Second)
		if m.Method == "session/update" {
			notes = append(notes, m)
			continue
		}
		if m.Method != "session/request_permission" {
			t.Fatalf("waiting for a permission request, got %s", m.raw)
		}
		req.id = m.ID
		if err := json.Unmarshal(m.Params, &req.params); err != nil {
			t.Fatal(err)
		}
	}
	return req, notes
}
