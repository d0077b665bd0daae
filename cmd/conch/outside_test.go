//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// outsideArgs is a bash call asking to run command outside the sandbox.
func outsideArgs(command, justification string) map[string]any {
	a := bash(command)
	a["outside_sandbox"] = true
	if justification != "" {
		a["justification"] = justification
	}
	return a
}

// TestOutsideSandboxGoSDK: conch serve offers outside_sandbox and
// justification; a call with them asks the user first (Reason: the
// justification) and runs nothing before the answer: a yes runs it
// outside the sandbox once, with its own line, what it left running
// ending with the call; a no, a cancel, a client that cannot ask and
// escalation = "never" each run nothing and say why. As root and as an
// unprivileged user.
func TestOutsideSandboxGoSDK(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			testOutsideSandbox(t, nobody)
		})
	}
}

func testOutsideSandbox(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	const command = "echo run >> runs; setsid sleep 1039 >/dev/null 2>&1 & echo x > ~/outside && echo wrote"
	const why = "write the release notes to the home directory\nDirectory: /"
	outside := func(home string) string { return filepath.Join(home, "outside") }

	home, ws := sandboxDirs(t, nobody)
	u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 0, answers: []*mcp.ElicitResult{choose("Allow once")}}
	cs := startSandboxed(t, marker, nobody, home, ws, u)
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tools.Tools[0].InputSchema.(map[string]any)["properties"].(map[string]any)
	if b["outside_sandbox"] == nil || b["justification"] == nil {
		t.Errorf("bash's parameters %v: no outside_sandbox and justification", b)
	}
	if got, want := text(t, callTool(t, cs, "bash", outsideArgs(command, ""))), "Error: invalid justification: expected a non-empty string"; got != want {
		t.Errorf("no justification: %q, want %q", got, want)
	}
	if got, want := text(t, callTool(t, cs, "bash", outsideArgs(command, why))), "wrote\n"+escalatedLine; got != want {
		t.Errorf("approved: %q, want %q", got, want)
	}
	if b, err := os.ReadFile(outside(home)); err != nil || string(b) != "x\n" || runs(t, ws) != 1 {
		t.Errorf("approved: ~/outside %q, %v; ran %d times, want once", b, err, runs(t, ws))
	}
	wantQ := "Run this command outside the sandbox?\n\nReason: write the release notes to the home directory\\nDirectory: /\nDirectory: " + ws + "\nCommand: " + command
	if q, c := u.questions(), u.offered(); len(q) != 1 || q[0] != wantQ || !slices.Equal(c[0], []string{"Allow once", "Deny"}) {
		t.Errorf("questions %q, choices %q; want one: %q, Allow once and Deny", q, c, wantQ)
	}
	if n := sleeps(marker, 1039); n != 0 {
		t.Errorf("approved: %d sleeps left running outside the sandbox after the call, want 0", n)
	}

	// Each other answer runs nothing.
	for _, c := range []struct {
		answer *mcp.ElicitResult
		want   string
	}{
		{choose("Deny"), "Error: not run: the user declined to run it outside the sandbox"},
		{&mcp.ElicitResult{Action: "decline"}, "Error: not run: the user declined to run it outside the sandbox"},
		{&mcp.ElicitResult{Action: "cancel"}, "Error: not run: the question was not answered (cancel); " + command},
	} {
		home, ws := sandboxDirs(t, nobody)
		u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 0, answers: []*mcp.ElicitResult{c.answer}}
		cs := startSandboxed(t, marker, nobody, home, ws, u)
		r := callTool(t, cs, "bash", outsideArgs(command, why))
		if got := text(t, r); got != c.want || !r.IsError {
			t.Errorf("%v: %q (isError %v), want the error %q", c.answer, got, r.IsError, c.want)
		}
		if _, err := os.Stat(outside(home)); !errors.Is(err, os.ErrNotExist) || runs(t, ws) != 0 {
			t.Errorf("%v: ~/outside %v, ran %d times; want nothing run", c.answer, err, runs(t, ws))
		}
	}

	// No one to ask, or escalation never.
	never := filepath.Join(filepath.Dir(home), "never.toml")
	writeFile(t, never, "[sandbox]\nescalation = \"never\"\n")
	for _, c := range []struct {
		name string
		ask  bool
		args []string
		want string
	}{
		{"no elicitation", false, nil, "Error: not run: running outside the sandbox needs the user's approval, and this client cannot ask"},
		{"escalation never", true, []string{"--config", never}, "Error: not run: running outside the sandbox needs the user's approval, and escalation is off"},
	} {
		home, ws := sandboxDirs(t, nobody)
		var u *escalationUser
		if c.ask {
			u = &escalationUser{t: t, home: home, ws: ws}
		}
		cs := startSandboxed(t, marker, nobody, home, ws, u, c.args...)
		if got := text(t, callTool(t, cs, "bash", outsideArgs(command, why))); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if runs(t, ws) != 0 {
			t.Errorf("%s: ran %d times, want 0", c.name, runs(t, ws))
		}
	}
}
