//go:build linux

package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestTSClientApproval runs conch serve with rules under the official
// TypeScript MCP client (approval.mjs in tsClientDir), whose elicitation
// handler accepts once, accepts for the session, declines, cancels and
// never answers; a client without elicitation; and two HTTP sessions.
// Like TestTSClient it needs node and npm; CONCH_SKIP_TS_CLIENT=1 skips
// it.
func TestTSClientApproval(t *testing.T) {
	skipTSClient(t)
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "[rules]\nask = [\"Bash(touch:*)\"]\n")
	stdout, _ := runTSClient(t, marker, "approval.mjs", testutil.ConchBinary(t), cfg, work)
	var out struct {
		Stdio struct {
			Calls []map[string]any
			Asked []map[string]any
			Fatal string
			Logs  string
		}
		Nocap map[string]any
		HTTP  map[string]any
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("script output: %v\n%s", err, stdout)
	}
	if out.Stdio.Fatal != "" {
		t.Fatalf("stdio: %s\nlogs:\n%s", out.Stdio.Fatal, out.Stdio.Logs)
	}
	file := func(name string) string { return filepath.Join(work, name) }
	declined := func(name string) string { return "Error: not run: the user declined touch " + file(name) }
	want := []map[string]any{
		{"name": "once", "text": "(no output)", "isError": false, "ran": true},
		{"name": "declined", "text": declined("declined"), "isError": true, "ran": false},
		// Dismissed without an answer (what clients without a user do):
		// no one declined anything.
		{"name": "cancelled", "text": "Error: not run: the question was not answered (cancel); touch " + file("cancelled"), "isError": true, "ran": false},
		{"name": "never", "thrown": "MCP error -32001: AbortError: This operation was aborted", "ran": false},
		{"name": "session1", "text": "(no output)", "isError": false, "ran": true},
		{"name": "session2", "text": "(no output)", "isError": false, "ran": true},
	}
	if d := cmp.Diff(want, out.Stdio.Calls); d != "" {
		t.Errorf("stdio calls (-want +got):\n%s", d)
	}
	// Five questions (session2 was not asked), none while its command ran;
	// the unanswered one withdrawn by the server.
	if len(out.Stdio.Asked) != 5 {
		t.Fatalf("asked %d times: %v", len(out.Stdio.Asked), out.Stdio.Asked)
	}
	q := out.Stdio.Asked[0]
	serverCwd, err := filepath.Abs(tsClientDir) // a client without roots: the server's own directory
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := "Allow this command to run?\n\nReason: rule Bash(touch:*)\nDirectory: " + serverCwd + "\nCommand: touch " + file("once")
	if q["message"] != wantMsg || q["mode"] != "form" || !cmp.Equal(q["choices"], []any{"Allow once", "Allow touch for this session", "Deny"}) {
		t.Errorf("question %v", q)
	}
	for i, q := range out.Stdio.Asked {
		if q["ranWhileAsked"] != false {
			t.Errorf("question %d: the command ran while it was open", i)
		}
	}
	if out.Stdio.Asked[3]["withdrawn"] != true {
		t.Errorf("the unanswered question was not withdrawn: %v", out.Stdio.Asked[3])
	}

	wantNocap := map[string]any{"text": "Error: not run: touch " + file("nocap") + " needs approval (rule Bash(touch:*)), but this client cannot ask the user; allow it in the conch configuration or run it yourself", "isError": true, "ran": false}
	if d := cmp.Diff(wantNocap, out.Nocap); d != "" {
		t.Errorf("client without elicitation (-want +got):\n%s", d)
	}

	if f, ok := out.HTTP["fatal"]; ok {
		t.Fatalf("http: %s\nlogs:\n%s", f, out.HTTP["logs"])
	}
	delete(out.HTTP, "logs")
	wantHTTP := map[string]any{
		"a1":     map[string]any{"text": "(no output)", "isError": false},
		"a2":     map[string]any{"text": "(no output)", "isError": false},
		"b1":     map[string]any{"text": declined("b1"), "isError": true},
		"askedA": float64(1),
		"askedB": float64(1),
		"ran":    []any{"a1", "a2"},
	}
	if d := cmp.Diff(wantHTTP, out.HTTP); d != "" {
		t.Errorf("two HTTP sessions (-want +got):\n%s", d)
	}
}
