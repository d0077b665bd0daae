//go:build linux

package acp_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestTTYAndInput: /tty runs a REPL on a terminal, drawn as a terminal
// card; at its prompt it becomes a task, and /input types a line with
// Enter into it. Every message is checked against the ACP schema by the
// client.
func TestTTYAndInput(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(t.TempDir())

	// A tty command that ends is a terminal card with its output, as the
	// terminal got it ("\r\n"), and exit.
	_, us := c.prompt(sid, "/tty test -t 0 && echo on a tty; exit 2")
	if got := cardOf(t, us, "call-1"); got.data != "on a tty\r\n" || get(got.final, "_meta", "terminal_exit", "exit_code") != float64(2) {
		t.Errorf("/tty that ends: %s", jsonString(us))
	}

	_, us = c.prompt(sid, `/tty while IFS= read -r -p '> ' l; do [ "$l" = quit ] && break; echo "= ${l^^}"; done`)
	if len(us) != 2 || get(us[0], "_meta", "terminal_info") == nil {
		t.Fatalf("/tty is not a terminal card: %s", jsonString(us))
	}
	const moved = "```console\n> \n[waiting for input; moved to background task bash-1: send input with task_input, read it with task_output, stop it with task_kill]\n```"
	if got := get(get(us[1], "content").([]any)[0], "content", "text"); got != moved {
		t.Errorf("/tty result %s", jsonString(us[1]))
	}

	_, us = c.prompt(sid, "/input bash-1 hello  world")
	if get(us[0], "title") != "Type into background task bash-1" || get(us[0], "kind") != "execute" {
		t.Errorf("/input call %s", jsonString(us[0]))
	}
	if got := get(get(us[1], "content").([]any)[0], "content", "text"); got != "```console\n> hello  world\n= HELLO  WORLD\n> \n[status: running]\n```" {
		t.Errorf("/input result %v", got)
	}
	_, us = c.prompt(sid, "/input bash-1 quit")
	if got := get(get(us[1], "content").([]any)[0], "content", "text"); got != "```console\n> quit\n[status: completed, exit code: 0]\n```" {
		t.Errorf("/input quit %v", got)
	}
	_, us = c.prompt(sid, "/input bash-1 more")
	const refused = "```console\nError: task bash-1 has already finished [status: completed, exit code: 0]\n```"
	if get(us[1], "status") != "failed" || get(get(us[1], "content").([]any)[0], "content", "text") != refused {
		t.Errorf("/input to a finished task %s", jsonString(us[1]))
	}
}

// TestTTYLiveOutput: a tty call's terminal card receives the terminal's
// output as it is produced, each update carrying only new bytes, in
// order; the final update carries the rest and the exit, and a replay
// draws the card the client had accumulated. Every message is checked
// against the ACP schema by the client.
func TestTTYLiveOutput(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)
	_, notes := c.call("session/prompt", promptParams(sid, "/tty for i in 1 2 3; do echo $i; sleep 0.3; done"))
	got := cardOf(t, c.rawUpdates(notes, sid), "call-1")
	if len(got.live) < 2 {
		t.Errorf("%d live updates %q, want several", len(got.live), got.live)
	}
	for _, d := range got.live {
		if d == "" {
			t.Errorf("an empty live update in %q", got.live)
		}
	}
	if got.data != "1\r\n2\r\n3\r\n" {
		t.Errorf("card holds %q, want the terminal's output in order", got.data)
	}
	if get(got.final, "_meta", "terminal_exit", "exit_code") != float64(0) || get(got.final, "status") != "completed" {
		t.Errorf("final update %s", jsonString(got.final))
	}
	h.close()

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	replayed := cardOf(t, c.rawUpdates(notes, sid), "call-1")
	if len(replayed.live) != 0 || replayed.data != got.data {
		t.Errorf("replayed card %q (live %q), live card %q", replayed.data, replayed.live, got.data)
	}
	if d := cmp.Diff(get(got.final, "_meta", "terminal_exit"), get(replayed.final, "_meta", "terminal_exit")); d != "" {
		t.Errorf("replayed exit (-live +replayed):\n%s", d)
	}
}
