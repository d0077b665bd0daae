//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// The lines a result ends with after a question about it
// (docs/sandbox.md#escalation).
const (
	escalatedLine  = "[ran outside the sandbox with the user's approval]"
	ranAgainLine   = "[ran again outside the sandbox with the user's approval]"
	declinedLine   = "[the user declined to run it outside the sandbox]"
	unansweredLine = "[the question was not answered]"
	rerunNote      = "\n\nThe command runs again in full; what it did the first time stays done."
)

// sandboxDirs makes a home and a workspace outside /tmp (which
// workspace-write leaves writable), owned by the unprivileged user when
// nobody is set.
func sandboxDirs(t *testing.T, nobody bool) (home, ws string) {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "conch-escalate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	home, ws = filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if nobody {
			if err := os.Chown(d, testutil.UnprivilegedID, testutil.UnprivilegedID); err != nil {
				t.Fatal(err)
			}
		}
	}
	return home, ws
}

// escalationUser answers the server's questions with the next answer of
// answers, and records each question with its choices, how many times
// the command had run (lines in ws/runs) and whether ~/outside existed
// while it was open. wantRuns is how many runs a question may follow (1
// after a denial, 0 for outside_sandbox; -1: not checked).
type escalationUser struct {
	t        *testing.T
	home, ws string
	answers  []*mcp.ElicitResult // nil: never answer
	wantRuns int

	mu      sync.Mutex
	asked   []string   // the questions' messages
	choices [][]string // their choices
}

func (u *escalationUser) questions() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

func (u *escalationUser) offered() [][]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.choices)
}

func (u *escalationUser) handle(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	u.asked = append(u.asked, req.Params.Message)
	u.choices = append(u.choices, decisionEnum(req))
	u.mu.Unlock()
	if len(u.answers) == 0 {
		u.t.Errorf("asked with no answer left: %q", req.Params.Message)
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	time.Sleep(100 * time.Millisecond) // a second run that did not wait would show
	if n := runs(u.t, u.ws); n != u.wantRuns && u.wantRuns >= 0 {
		u.t.Errorf("the command ran %d times while the user was asked, want %d", n, u.wantRuns)
	}
	if _, err := os.Stat(filepath.Join(u.home, "outside")); !errors.Is(err, os.ErrNotExist) {
		u.t.Errorf("~/outside exists (or %v) while the user is asked", err)
	}
	a := u.answers[0]
	u.answers = u.answers[1:]
	if a == nil { // never answered: the server withdraws the question
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return a, nil
}

// decisionEnum is the choices of a question's form.
func decisionEnum(req *mcp.ElicitRequest) []string {
	b, err := json.Marshal(req.Params.RequestedSchema)
	if err != nil {
		return nil
	}
	var s struct {
		Properties struct {
			Decision struct{ Enum []string }
		}
	}
	json.Unmarshal(b, &s)
	return s.Properties.Decision.Enum
}

// choose is an answer choosing decision.
func choose(decision string) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}
}

// runs is how many times the escalation command ran (its first write,
// into the workspace, always works).
func runs(t *testing.T, ws string) int {
	b, err := os.ReadFile(filepath.Join(ws, "runs"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// escalationCommand counts its runs in the workspace, leaves a process
// behind in a session of its own (which the sandboxed run keeps until
// its session ends, and the run outside the sandbox loses when its call
// ends), then writes ~/outside, which workspace-write denies, and fails
// either way.
const escalationCommand = "echo run >> runs; setsid sleep 1037 >/dev/null 2>&1 & echo x > ~/outside && echo wrote; echo err >&2; exit 3"

// sleeps counts the live processes with marker that run "sleep <n>".
func sleeps(marker string, n int) int {
	c := 0
	for _, p := range testutil.Processes(marker) {
		if testutil.Cmdline(p.Pid) == fmt.Sprintf("sleep %d", n) {
			c++
		}
	}
	return c
}

// startSandboxed runs conch serve --sandbox workspace-write on stdio with
// HOME and the workspace given, as the unprivileged user when nobody is
// set, and connects the Go SDK client, with elicitation when u is set.
func startSandboxed(t *testing.T, marker string, nobody bool, home, ws string, u *escalationUser, args ...string) *mcp.ClientSession {
	t.Helper()
	return startSandboxedRev(t, legacyMCP.ProtocolVersion, marker, nobody, home, ws, u, args...)
}

// startSandboxedRev is startSandboxed with the client at protocol
// revision rev.
func startSandboxedRev(t *testing.T, rev, marker string, nobody bool, home, ws string, u *escalationUser, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := testutil.Conch(t, marker, append([]string{"serve", "--sandbox", "workspace-write", "--cwd", ws}, args...)...)
	state := t.TempDir()
	if nobody {
		testutil.Unprivileged(t, cmd)
		state = testutil.UnprivilegedDir(t)
	}
	cmd.Env = append(cmd.Env, "HOME="+home, "TMPDIR="+state, "XDG_STATE_HOME="+state)
	cmd.Stderr = newLogBuffer(t, "conch serve")
	var o *mcp.ClientOptions
	if u != nil {
		o = &mcp.ClientOptions{ElicitationHandler: u.handle}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, o).Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return cs
}

// TestEscalationGoSDK: a command the sandbox denied is run again outside
// it only after the user's yes (Go SDK client with elicitation), and the
// result is the second run's followed by its own line; what the second
// run left running ends with the call (the first run's stays); a no and
// a cancel leave the sandboxed result with a line that says which; a
// client that cannot be asked and escalation = "never" leave it as it
// is, and run nothing more. As root and as an unprivileged user.
func TestEscalationGoSDK(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			testEscalationGoSDK(t, nobody)
		})
	}
}

func testEscalationGoSDK(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	// A cleanup, so that it runs after the servers' (LIFO).
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	outside := func(home string) string { return filepath.Join(home, "outside") }
	denied := func(home, ws string) string {
		return "[stderr]\nbash: line 1: " + outside(home) + ": Permission denied\nerr\n" +
			"[sandbox: write to " + outside(home) + " denied under workspace-write mode; writable: " + ws + ", "
	}

	// Yes: the second run writes ~/outside; the result is its own.
	home, ws := sandboxDirs(t, nobody)
	u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Allow once")}}
	auditDir := t.TempDir()
	if nobody {
		auditDir = testutil.UnprivilegedDir(t)
	}
	auditPath := filepath.Join(auditDir, "audit", "audit.jsonl")
	cs := startSandboxed(t, marker, nobody, home, ws, u, "--audit-path", auditPath)
	r := callTool(t, cs, "bash", bash(escalationCommand))
	// The audit log tells the story: the denied write, the first run's
	// end, the question, the user's answer, the grant, the second run's
	// end (written by the log's own writer, just after the call).
	wantEvents := []string{"call", "denied", "process", "question", "answer", "grant", "process"}
	var gotEvents []string
	var lines string
	testutil.WaitFor(t, 10*time.Second, "the escalation's audit lines", func() bool {
		b, _ := os.ReadFile(auditPath)
		lines, gotEvents = string(b), nil
		for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
			_, rest, _ := strings.Cut(l, `"event":"`)
			ev, _, _ := strings.Cut(rest, `"`)
			gotEvents = append(gotEvents, ev)
		}
		return len(gotEvents) >= len(wantEvents)
	})
	if !slices.Equal(gotEvents, wantEvents) || !strings.Contains(lines, `"kind":"escalation","choice":"allow_once","answered_by":"user"`) ||
		!strings.Contains(lines, `"event":"denied","call_id":`) || !strings.Contains(lines, `"path":"`+outside(home)+`","op":"write"`) ||
		!strings.Contains(lines, `"event":"grant"`) || !strings.Contains(lines, `"kind":"outside_sandbox"`) {
		t.Errorf("audit log: events %v, want %v:\n%s", gotEvents, wantEvents, lines)
	}
	// The second run's result, its exit marker included, then the line.
	testutil.Golden(t, "testdata/escalated.golden", text(t, r))
	var v struct {
		Sandbox struct{ Mode, Network string }
	}
	if b, err := json.Marshal(r.StructuredContent); err != nil || json.Unmarshal(b, &v) != nil || v.Sandbox.Mode != "full-access" || v.Sandbox.Network != "on" {
		t.Errorf("approved: structured value %v, want the sandbox full-access, network on", r.StructuredContent)
	}
	if b, err := os.ReadFile(outside(home)); err != nil || string(b) != "x\n" {
		t.Errorf("approved: ~/outside %q, %v", b, err)
	}
	if n := runs(t, ws); n != 2 {
		t.Errorf("approved: ran %d times, want 2", n)
	}
	wantQ := "Run this command again outside the sandbox?\n\nReason: the sandbox denied a write to " + outside(home) +
		"\nDirectory: " + ws + "\nCommand: " + escalationCommand + rerunNote
	if q := u.questions(); len(q) != 1 || q[0] != wantQ {
		t.Errorf("questions %q, want one: %q", q, wantQ)
	}
	// The home itself is never offered for the session.
	if c := u.offered(); len(c) != 1 || !slices.Equal(c[0], []string{"Allow once", "Deny"}) {
		t.Errorf("choices %q, want Allow once and Deny", c)
	}
	// The sandboxed run's sleep runs on (until the session ends); the
	// one outside the sandbox ended with the call.
	if n := sleeps(marker, 1037); n != 1 {
		t.Errorf("approved: %d sleeps left, want 1 (the sandboxed run's)", n)
	}

	// With the network off, the second run has it: a connect to a
	// listener on this machine fails, then works after the yes.
	home, ws = sandboxDirs(t, nobody)
	u = &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Allow once")}}
	cs = startSandboxed(t, marker, nobody, home, ws, u, "--network", "off")
	connect, _ := tcpConnect(t)
	connect = "echo run >> runs; " + connect
	if got, want := text(t, callTool(t, cs, "bash", bash(connect))), "connected\n"+ranAgainLine; got != want {
		t.Errorf("network off, approved: %q, want %q", got, want)
	}
	wantQ = "Run this command again outside the sandbox?\n\nReason: the sandbox denied network access\nDirectory: " + ws + "\nCommand: " + connect + rerunNote
	if q := u.questions(); len(q) != 1 || q[0] != wantQ || runs(t, ws) != 2 {
		t.Errorf("network off: questions %q, want one: %q; ran %d times, want 2", q, wantQ, runs(t, ws))
	}

	// No: the sandboxed result stands, nothing runs again, and the
	// model learns the answer.
	for _, c := range []struct {
		answer *mcp.ElicitResult
		line   string
	}{{&mcp.ElicitResult{Action: "decline"}, declinedLine}, {choose("Deny"), declinedLine}, {&mcp.ElicitResult{Action: "cancel"}, unansweredLine}} {
		home, ws := sandboxDirs(t, nobody)
		u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{c.answer}}
		cs := startSandboxed(t, marker, nobody, home, ws, u)
		got := text(t, callTool(t, cs, "bash", bash(escalationCommand)))
		if !strings.HasPrefix(got, denied(home, ws)) || !strings.HasSuffix(got, "]\n[exit code: 3]\n"+c.line) {
			t.Errorf("%s: %q, want the sandboxed result and %q", c.answer.Action, got, c.line)
		}
		if _, err := os.Stat(outside(home)); !errors.Is(err, os.ErrNotExist) || runs(t, ws) != 1 || len(u.questions()) != 1 {
			t.Errorf("%s: ~/outside %v, ran %d times, asked %d times; want no file, one run, one question", c.answer.Action, err, runs(t, ws), len(u.questions()))
		}
	}

	// Never answered: the client gives up on the call; nothing runs again.
	home, ws = sandboxDirs(t, nobody)
	u = &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{nil}}
	cs = startSandboxed(t, marker, nobody, home, ws, u)
	// It gives up once it was asked: a give-up after a fixed second came
	// before the sandboxed run on a loaded machine (ran 0 times, asked 0
	// times, at load 25).
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan struct{})
	go func() {
		defer close(gaveUp)
		defer cancel()
		for len(u.questions()) == 0 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash(escalationCommand)})
	cancel()
	<-gaveUp
	if err == nil {
		t.Errorf("unanswered: the call returned before the client gave up")
	}
	time.Sleep(500 * time.Millisecond) // a second run would show
	if _, err := os.Stat(outside(home)); !errors.Is(err, os.ErrNotExist) || runs(t, ws) != 1 || len(u.questions()) != 1 {
		t.Errorf("unanswered: ~/outside %v, ran %d times, asked %d times; want no file, one run, one question", err, runs(t, ws), len(u.questions()))
	}

	// No one to ask, or escalation never: no question, the sandboxed
	// result stands as it is.
	never := filepath.Join(filepath.Dir(home), "never.toml") // readable by the unprivileged user too
	writeFile(t, never, "[sandbox]\nescalation = \"never\"\n")
	for _, c := range []struct {
		name string
		ask  bool
		args []string
	}{{"no elicitation", false, nil}, {"escalation never", true, []string{"--config", never}}} {
		home, ws := sandboxDirs(t, nobody)
		var u *escalationUser
		if c.ask {
			u = &escalationUser{t: t, home: home, ws: ws}
		}
		cs := startSandboxed(t, marker, nobody, home, ws, u, c.args...)
		got := text(t, callTool(t, cs, "bash", bash(escalationCommand)))
		if !strings.HasPrefix(got, denied(home, ws)) || !strings.HasSuffix(got, "]\n[exit code: 3]") {
			t.Errorf("%s: %q, want the sandboxed result", c.name, got)
		}
		if _, err := os.Stat(outside(home)); !errors.Is(err, os.ErrNotExist) || runs(t, ws) != 1 {
			t.Errorf("%s: ~/outside %v, ran %d times; want no file, one run", c.name, err, runs(t, ws))
		}
	}
}

// TestTSClientEscalation runs conch serve --sandbox workspace-write under
// the official TypeScript MCP client (escalate.mjs in tsClientDir): a
// write to the home, which the sandbox denies, is run again outside it
// after the elicitation handler accepts, and not after it declines or
// cancels, each answer told to the model, nor for a client without
// elicitation; a command that asks to run outside the sandbox runs once,
// after the yes. Like TestTSClient it needs node and npm;
// CONCH_SKIP_TS_CLIENT=1 skips it.
func TestTSClientEscalation(t *testing.T) {
	skipTSClient(t)
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	home, ws := sandboxDirs(t, false)
	stdout, _ := runTSClient(t, marker, "escalate.mjs", testutil.ConchBinary(t), home, ws)
	type call struct {
		Name, Text     string
		IsError, Wrote bool
		Runs           int
	}
	type question struct {
		Message         string
		Choices         []string
		RunsWhileAsked  int
		WroteWhileAsked bool
	}
	var out struct {
		Elicit, Nocap struct {
			Calls       []call
			Asked       []question
			Fatal, Logs string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("script output: %v\n%s", err, stdout)
	}
	for _, s := range []struct{ Fatal, Logs string }{{out.Elicit.Fatal, out.Elicit.Logs}, {out.Nocap.Fatal, out.Nocap.Logs}} {
		if s.Fatal != "" {
			t.Fatalf("%s\nlogs:\n%s", s.Fatal, s.Logs)
		}
	}
	file := func(name string) string { return filepath.Join(home, "outside-"+name) }
	sandboxed := func(name string) string {
		return "[stderr]\nbash: line 1: " + file(name) + ": Permission denied\n" +
			"[sandbox: write to " + file(name) + " denied under workspace-write mode; writable: " + ws + ", "
	}
	command := func(name string) string { return "echo run >> runs-" + name + "; echo x > ~/outside-" + name }
	lines := map[string]string{"declined": "\n" + declinedLine, "cancelled": "\n" + unansweredLine, "nocap": ""}
	for _, c := range append(out.Elicit.Calls, out.Nocap.Calls...) {
		switch c.Name {
		case "accepted":
			if c.Text != "(no output)\n"+ranAgainLine || c.IsError || !c.Wrote || c.Runs != 2 {
				t.Errorf("accepted: %+v; want the second run's result and its line, the file written, two runs", c)
			}
			continue
		case "outside":
			if c.Text != "(no output)\n"+escalatedLine || c.IsError || !c.Wrote || c.Runs != 1 {
				t.Errorf("outside: %+v; want its result and its line, the file written, one run", c)
			}
			continue
		}
		if !strings.HasPrefix(c.Text, sandboxed(c.Name)) || !strings.HasSuffix(c.Text, "]\n[exit code: 1]"+lines[c.Name]) || c.IsError || c.Wrote || c.Runs != 1 {
			t.Errorf("%s: %+v; want the sandboxed result%s, no file, one run", c.Name, c, lines[c.Name])
		}
	}
	if len(out.Elicit.Calls) != 4 || len(out.Nocap.Calls) != 1 {
		t.Errorf("calls: %+v, %+v", out.Elicit.Calls, out.Nocap.Calls)
	}
	if len(out.Elicit.Asked) != 4 || len(out.Nocap.Asked) != 0 {
		t.Fatalf("questions: %+v (want one per call), %+v (want none)", out.Elicit.Asked, out.Nocap.Asked)
	}
	for i, name := range []string{"accepted", "declined", "cancelled"} {
		q := out.Elicit.Asked[i]
		want := question{
			Message: "Run this command again outside the sandbox?\n\nReason: the sandbox denied a write to " + file(name) +
				"\nDirectory: " + ws + "\nCommand: " + command(name) + rerunNote,
			Choices:        []string{"Allow once", "Deny"},
			RunsWhileAsked: 1,
		}
		if d := cmp.Diff(want, q); d != "" {
			t.Errorf("question %d (-want +got):\n%s", i, d)
		}
	}
	want := question{
		Message: "Run this command outside the sandbox?\n\nReason: write a file in the home directory\nDirectory: " + ws + "\nCommand: " + command("outside"),
		Choices: []string{"Allow once", "Deny"},
	}
	if d := cmp.Diff(want, out.Elicit.Asked[3]); d != "" {
		t.Errorf("the outside_sandbox question (-want +got):\n%s", d)
	}
}
