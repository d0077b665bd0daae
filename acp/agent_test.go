//go:build linux

package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/acp"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// harness runs an Agent in this process over pipes, with a real local
// executor whose commands carry the test's marker.
type harness struct {
	t      testing.TB
	cli    *client
	logs   *syncBuffer
	done   chan error
	cancel context.CancelFunc
	ex     *local.Executor
	rt     *tasks.Runtime
	closed bool
}

// newHarness starts an agent recording sessions under state.
func newHarness(t testing.TB, state, marker string) *harness {
	t.Helper()
	return newHarnessTools(t, state, marker, tools.Options{})
}

// newHarnessTools is newHarness with tool options (their Tasks and Home
// are the harness's).
func newHarnessTools(t testing.TB, state, marker string, to tools.Options) *harness {
	t.Helper()
	ex, err := local.New(&local.Options{
		Grace:   500 * time.Millisecond,
		Environ: append(os.Environ(), testutil.MarkerEnv+"="+marker),
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := tasks.New(nil)
	to.Tasks, to.Home = rt, state
	ts := tools.New(ex, &to)
	logs := &syncBuffer{}
	agent := acp.NewAgent(ts, &acp.AgentOptions{
		SessionDir: filepath.Join(state, "sessions"),
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
		Version:    "test",
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, logs: logs, done: make(chan error, 1), cancel: cancel, ex: ex, rt: rt}
	go func() {
		err := agent.Serve(ctx, inR, outW)
		outW.Close()
		h.done <- err
	}()
	h.cli = newClient(t, inW, outR)
	t.Cleanup(h.close)
	return h
}

// close ends the agent's input and waits for it to dispose of everything.
func (h *harness) close() {
	if h.closed {
		return
	}
	h.closed = true
	h.cli.eof()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		h.t.Errorf("Serve did not return after the end of input")
	}
	h.cancel()
	h.rt.Close()
	if err := h.ex.Close(); err != nil {
		h.t.Errorf("executor close: %v", err)
	}
}

func TestAgentPromptCards(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	work := t.TempDir()
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)

	stop, us := c.prompt(sid, "echo hi")
	if stop != "end_turn" {
		t.Errorf("stop reason %q", stop)
	}
	if d := cmp.Diff([]string{"tool_call", "tool_call_update"}, kinds(us)); d != "" {
		t.Fatalf("updates (-want +got):\n%s", d)
	}
	if got := get(us[0], "_meta", "terminal_info", "cwd"); got != work {
		t.Errorf("terminal cwd %v, want %s", got, work)
	}
	if got := get(us[0], "title"); got != "echo hi" {
		t.Errorf("title %v", got)
	}
	if got := get(us[1], "_meta", "terminal_output", "data"); got != "hi\n" {
		t.Errorf("output %v", got)
	}
	if us[1]["content"] != nil {
		t.Errorf("terminal result has content: %v", us[1])
	}

	// A failing command: failed, with its exit code.
	_, us = c.prompt(sid, "echo failing; exit 3")
	if get(us[1], "status") != "failed" || get(us[1], "_meta", "terminal_exit", "exit_code") != float64(3) {
		t.Errorf("failing command: %s", jsonString(us[1]))
	}

	// Commands run in the session's cwd.
	_, us = c.prompt(sid, "pwd")
	if got := get(us[1], "_meta", "terminal_output", "data"); got != work+"\n" {
		t.Errorf("pwd = %v, want %s", got, work)
	}

	// A blank prompt gets the help text.
	_, us = c.prompt(sid, "   ")
	if d := cmp.Diff([]string{"agent_message_chunk"}, kinds(us)); d != "" || get(us[0], "content", "text") != acp.HelpText {
		t.Errorf("blank prompt: %s", jsonString(us))
	}

	// Background, then the task tools.
	_, us = c.prompt(sid, "&echo bg; sleep 0.1")
	if get(us[0], "_meta") != nil || get(us[1], "content") == nil {
		t.Errorf("background call is not a generic card: %s", jsonString(us))
	}
	text := get(us[1], "content").([]any)[0]
	if got := get(text, "content", "text"); got != "```console\nstarted background task bash-1\n```" {
		t.Errorf("background ack %v", got)
	}
	_, us = c.prompt(sid, "sleep 0.5")
	// The task finished on its own during that prompt: its notice follows.
	if d := cmp.Diff([]string{"tool_call", "tool_call_update", "agent_message_chunk"}, kinds(us)); d != "" {
		t.Fatalf("updates after a background task finished (-want +got):\n%s", d)
	}
	if got := get(us[2], "content", "text").(string); !strings.HasPrefix(got, "background task bash-1 (bash: echo bg; sleep 0.1) finished") ||
		!strings.HasSuffix(got, " with `/output bash-1`.") {
		t.Errorf("notice %q", got)
	}
	_, us = c.prompt(sid, "/output bash-1")
	if get(us[0], "title") != "Read output from background task bash-1" || get(us[0], "kind") != "read" {
		t.Errorf("/output call %s", jsonString(us[0]))
	}
	if got := get(get(us[1], "content").([]any)[0], "content", "text"); got != "```console\nbg\n[status: completed, exit code: 0]\n```" {
		t.Errorf("/output result %v", got)
	}
	_, us = c.prompt(sid, "/tasks")
	if get(us[0], "title") != "List background tasks" {
		t.Errorf("/tasks call %s", jsonString(us[0]))
	}
	_, us = c.prompt(sid, "/kill bash-1")
	if get(us[0], "title") != "Kill background task bash-1" || get(us[1], "status") != "completed" {
		t.Errorf("/kill %s", jsonString(us))
	}
}

// TestPromptReplies: a blank prompt, /help, an unknown /word and a task
// command without its id are answered with a message and run nothing; a
// path is still a command.
func TestPromptReplies(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	const help = "conch runs each prompt as one bash command in the session's folder. " +
		"Start it with `&` to run it in the background; `/tty <command>` runs a program that asks for input on a terminal " +
		"(it becomes a background task when it waits for input); `/tasks` lists background tasks, " +
		"`/output <id>` reads one's new output, `/input <id> <text>` types a line into one, `/kill <id>` stops one."
	for _, r := range []struct{ prompt, reply string }{
		{"   ", help},
		{"/help", help},
		{"/kill", "Usage: `/kill <id>` stops a background task; `/tasks` lists them."},
		{" /kill  ", "Usage: `/kill <id>` stops a background task; `/tasks` lists them."},
		{"/output", "Usage: `/output <id>` reads a background task's new output; `/tasks` lists them."},
		{"/input", "Usage: `/input <id> <text>` types a line into a background task started with `/tty`; `/tasks` lists them."},
		{"/tty", "Usage: `/tty <command>` runs a command on a terminal; answer it with `/input <id> <text>`."},
		{"/taks", "Unknown command `/taks`. " + help},
		{"/rm -rf x", "Unknown command `/rm`. " + help},
	} {
		stop, us := c.prompt(sid, r.prompt)
		if stop != "end_turn" || len(us) != 1 || get(us[0], "sessionUpdate") != "agent_message_chunk" || get(us[0], "content", "text") != r.reply {
			t.Errorf("%q: %s %s, want the message %q", r.prompt, stop, jsonString(us), r.reply)
		}
	}
	if acp.HelpText != help {
		t.Errorf("HelpText = %q", acp.HelpText)
	}
	// A path is a command, not a slash command.
	if _, us := c.prompt(sid, "/bin/echo hi"); len(us) != 2 || get(us[1], "_meta", "terminal_output", "data") != "hi\n" {
		t.Errorf("/bin/echo hi: %s", jsonString(us))
	}
}

// TestSessionCwdRefused: session/new and session/load refuse a cwd that
// is not absolute, does not exist or is not a folder, with an invalid
// params error naming it.
func TestSessionCwdRefused(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)
	file := filepath.Join(work, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(work, "missing")
	for _, r := range []struct{ cwd, msg string }{
		{"relative/dir", `cwd must be an absolute path, got "relative/dir"`},
		{missing, "cwd " + missing + " does not exist"},
		{file, "cwd " + file + " is not a directory"},
	} {
		for _, method := range []string{"session/new", "session/load"} {
			e := c.callErr(method, map[string]any{"sessionId": sid, "cwd": r.cwd, "mcpServers": []any{}})
			if e.Code != -32602 || e.Data["error"] != r.msg {
				t.Errorf("%s with cwd %q: %+v, want -32602 with %q", method, r.cwd, e, r.msg)
			}
		}
	}
	// A folder reached through a link is fine, and runs in its real path.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(work, link); err != nil {
		t.Fatal(err)
	}
	if _, us := c.prompt(c.newSession(link), "pwd"); get(us[1], "_meta", "terminal_output", "data") != work+"\n" {
		t.Errorf("session in a linked folder: %s", jsonString(us))
	}
}

// TestCapabilitySnapshot: a session keeps the capability it was created
// with, whatever a later initialize says.
func TestCapabilitySnapshot(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	work := t.TempDir()
	c.initialize(true)
	withTerm := c.newSession(work)
	c.initialize(false)
	_, us := c.prompt(withTerm, "echo hi")
	if get(us[0], "_meta", "terminal_info") == nil || get(us[1], "_meta", "terminal_output") == nil || us[1]["content"] != nil {
		t.Errorf("call and result of a session created with terminals are not terminal cards:\n%s", jsonString(us))
	}
	// A session created after the second initialize has no terminals.
	without := c.newSession(work)
	c.initialize(true)
	_, us = c.prompt(without, "echo hi")
	if get(us[0], "_meta") != nil || get(us[1], "_meta") != nil {
		t.Errorf("a session created without terminals draws terminals:\n%s", jsonString(us))
	}
	if got := get(get(us[1], "content").([]any)[0], "content", "text"); got != "```console\nhi\n```" {
		t.Errorf("fallback text %v", got)
	}
}

// TestCancel: session/cancel kills the running command, and the prompt
// answers cancelled after the final update, whose terminal keeps what the
// command had printed; a load replays that card the same.
func TestCancel(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	id := c.start("session/prompt", promptParams(sid, "echo started; : > up; sleep 30"))
	first := c.recv(10 * time.Second)
	if get(first.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", first.raw)
	}
	testutil.WaitFor(t, 5*time.Second, "the command to start", func() bool { _, err := os.Stat(filepath.Join(work, "up")); return err == nil })
	start := time.Now()
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	resp, notes := c.await(id)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancel took %v", took)
	}
	if string(resp.Result) != `{"stopReason":"cancelled"}` {
		t.Errorf("cancelled prompt answered %s", resp.raw)
	}
	us := c.updates(notes, sid)
	if len(us) != 1 || get(us[0], "status") != "failed" || us[0]["content"] != nil ||
		get(us[0], "_meta", "terminal_output", "data") != "started\n" || get(us[0], "_meta", "terminal_exit", "signal") != "SIGTERM" {
		t.Fatalf("final update %s, want the output so far and the signal", jsonString(us))
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		t.Errorf("the cancelled command is still running: %v", left)
	}
	// The session goes on.
	if stop, _ := c.prompt(sid, "true"); stop != "end_turn" {
		t.Errorf("prompt after a cancel: %s", stop)
	}
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	replayed := c.updates(notes, sid)
	if len(replayed) < 3 {
		t.Fatalf("replay %s", jsonString(replayed))
	}
	if d := cmp.Diff(us[0], replayed[2]); d != "" {
		t.Errorf("the cancelled card replayed (-live +replayed):\n%s", d)
	}
}

// TestExitKillsTasks: the end of input kills every task of every session.
func TestExitKillsTasks(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(false)
	for i := 0; i < 2; i++ {
		sid := c.newSession(t.TempDir())
		c.prompt(sid, "&sleep 60")
	}
	// A foreground command in flight too.
	c.start("session/prompt", promptParams(c.newSession(t.TempDir()), "sleep 60"))
	testutil.WaitFor(t, 5*time.Second, "the commands to start", func() bool { return len(testutil.Processes(marker)) >= 3 })
	c.w.Close()
	// The in-flight prompt may still answer before the output closes.
	for range c.in {
	}
	h.closed = true
	select {
	case err := <-h.done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		t.Errorf("processes left after Serve returned: %v", left)
	}
	h.rt.Close()
	h.ex.Close()
}

// TestServeEndsOnContext: a cancelled ctx (SIGTERM in conch acp) ends
// Serve like the end of input does.
func TestServeEndsOnContext(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(false)
	c.prompt(c.newSession(t.TempDir()), "&sleep 60")
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	h.closed = true
	c.w.Close()
	for range c.in {
	}
	h.rt.Close()
	h.ex.Close()
}

func TestBadInput(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli

	// A line that is not JSON, and JSON that is not a message: errors
	// with a null id, and the agent reads on.
	for _, c2 := range []struct {
		line string
		code float64
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize"`, -32700},
		{`not json at all`, -32700},
		{`[1,2,3]`, -32600},
		{`{"jsonrpc":"2.0"}`, -32600},
	} {
		c.sendRaw(c2.line)
		m := c.recv(5 * time.Second)
		var e rpcError
		json.Unmarshal(m.Error, &e)
		if string(m.ID) != "null" || float64(e.Code) != c2.code {
			t.Errorf("%s: answered %s, want code %v with a null id", c2.line, m.raw, c2.code)
		}
	}
	if !strings.Contains(h.logs.String(), "refusing an input line") {
		t.Errorf("bad lines were not logged: %s", h.logs.String())
	}
	c.initialize(true)

	if e := c.callErr("no/such_method", map[string]any{}); e.Code != -32601 {
		t.Errorf("unknown method: %+v", e)
	}
	for _, m := range []string{"session/list", "session/resume", "session/set_mode", "authenticate"} {
		if e := c.callErr(m, map[string]any{"sessionId": "x", "cwd": "/", "methodId": "x", "modeId": "x"}); e.Code != -32601 {
			t.Errorf("%s: %+v", m, e)
		}
	}
	if e := c.callErr("session/prompt", promptParams("sess_nope", "echo hi")); e.Code != -32002 {
		t.Errorf("prompt for an unknown session: %+v", e)
	}
	if e := c.callErr("session/load", map[string]any{"sessionId": "sess_nope", "cwd": "/", "mcpServers": []any{}}); e.Code != -32002 {
		t.Errorf("load of an unknown session: %+v", e)
	}
	if e := c.callErr("session/load", map[string]any{"sessionId": "../../etc/passwd", "cwd": "/", "mcpServers": []any{}}); e.Code != -32002 {
		t.Errorf("load of a path: %+v", e)
	}
	if e := c.callErr("session/new", map[string]any{"cwd": "relative/dir", "mcpServers": []any{}}); e.Code != -32602 {
		t.Errorf("session/new with a relative cwd: %+v", e)
	}
	if e := c.callErr("session/prompt", map[string]any{"sessionId": 7}); e.Code != -32602 {
		t.Errorf("malformed params: %+v", e)
	}
	// A cancel for an unknown session is ignored; the agent still works.
	c.notify("session/cancel", map[string]any{"sessionId": "sess_nope"})
	sid := c.newSession(t.TempDir())
	if stop, _ := c.prompt(sid, "echo still here"); stop != "end_turn" {
		t.Errorf("after bad input: %s", stop)
	}
}

// TestLoadReplaysWithTheLoadingSnapshot: the cards a load replays equal
// the live ones with the same capability, and follow the loading
// session's capability otherwise.
func TestLoadReplaysWithTheLoadingSnapshot(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state := t.TempDir()
	work := t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)
	var live []map[string]any
	for _, p := range []string{"echo one", "exit 4", "&true", "   ", "/tasks"} {
		_, us := c.prompt(sid, p)
		live = append(live, us...)
	}
	h.close()

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes := c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	replayed := c.updates(notes, sid)
	var prompts []string
	var cards []map[string]any
	for _, u := range replayed {
		if u["sessionUpdate"] == "user_message_chunk" {
			prompts = append(prompts, get(u, "content", "text").(string))
			continue
		}
		cards = append(cards, u)
	}
	if d := cmp.Diff([]string{"echo one", "exit 4", "&true", "   ", "/tasks"}, prompts); d != "" {
		t.Errorf("replayed prompts (-want +got):\n%s", d)
	}
	if d := cmp.Diff(live, cards); d != "" {
		t.Errorf("replayed cards differ from the live ones (-live +replayed):\n%s", d)
	}
	if replayed[0]["sessionUpdate"] != "user_message_chunk" {
		t.Errorf("replay does not start with the first prompt: %s", jsonString(replayed[0]))
	}
	// The loaded session goes on, its call ids after the recorded ones.
	_, us := c.prompt(sid, "echo after")
	if got := get(us[0], "toolCallId"); got != "call-5" {
		t.Errorf("first call id after load %v, want call-5", got)
	}
	h.close()

	// Loaded by a client without terminals: the same record, text cards.
	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(false)
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	for _, u := range c.updates(notes, sid) {
		if u["_meta"] != nil {
			t.Errorf("replay without terminals has _meta: %s", jsonString(u))
		}
	}
	// The same cards, drawn as text: not an empty replay that no check
	// above could fail.
	var textCards []map[string]any
	for _, u := range c.updates(notes, sid) {
		if u["sessionUpdate"] != "user_message_chunk" {
			textCards = append(textCards, u)
		}
	}
	if len(textCards) != len(live)+2 { // and the call and result of "echo after"
		t.Fatalf("replay without terminals: %d cards, want %d:\n%s", len(textCards), len(live)+2, jsonString(textCards))
	}
	if got := firstText(textCards[1]); got != "```console\none\n```" {
		t.Errorf("first result replayed without terminals: %s", jsonString(textCards[1]))
	}
	if get(textCards[0], "title") != "echo one" || get(textCards[0], "content") != nil {
		t.Errorf("first call replayed without terminals: %s", jsonString(textCards[0]))
	}
}

// TestTruncatedSessionFile: a cut or garbled line is skipped with a
// logged reason; the rest of that session and every other session load.
func TestTruncatedSessionFile(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state := t.TempDir()
	work := t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	a := c.newSession(work)
	b := c.newSession(work)
	for _, sid := range []string{a, b} {
		c.prompt(sid, "echo first")
		c.prompt(sid, "echo second")
	}
	h.close()

	// Cut a's last record in the middle, as a crash would, and put a
	// garbled line before it.
	path := filepath.Join(state, "sessions", a+".jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	last := lines[len(lines)-1]
	cut := strings.Join(lines[:len(lines)-1], "") + "{\"type\":\"prompt\",garbage\n" + last[:len(last)/2]
	if err := os.WriteFile(path, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	bBefore, _ := os.ReadFile(filepath.Join(state, "sessions", b+".jsonl"))

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes := c.call("session/load", map[string]any{"sessionId": a, "cwd": work, "mcpServers": []any{}})
	got := kinds(c.updates(notes, a))
	// The second result was cut: its call is drawn failed, with no result.
	want := []string{"user_message_chunk", "tool_call", "tool_call_update", "user_message_chunk", "tool_call", "tool_call_update"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("replay of the cut session (-want +got):\n%s", d)
	}
	us := c.updates(notes, a)
	if get(us[5], "status") != "failed" {
		t.Errorf("call without a recorded result: %s", jsonString(us[5]))
	}
	logs := h.logs.String()
	if strings.Count(logs, "skipping a session record") != 2 || !strings.Contains(logs, "truncated last line") {
		t.Errorf("skipped lines not logged as such:\n%s", logs)
	}
	// The other session is whole.
	_, notes = c.call("session/load", map[string]any{"sessionId": b, "cwd": work, "mcpServers": []any{}})
	if got := kinds(c.updates(notes, b)); len(got) != 6 || get(c.updates(notes, b)[5], "status") != "completed" {
		t.Errorf("the other session: %v", got)
	}
	// Appending to the cut session starts a new line: the next load reads
	// the new records.
	c.prompt(a, "echo third")
	h.close()
	bAfter, _ := os.ReadFile(filepath.Join(state, "sessions", b+".jsonl"))
	if !strings.HasPrefix(string(bAfter), string(bBefore)) {
		t.Errorf("session %s lost records", b)
	}

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes = c.call("session/load", map[string]any{"sessionId": a, "cwd": work, "mcpServers": []any{}})
	us = c.updates(notes, a)
	if n := len(us); n != 9 || get(us[6], "content", "text") != "echo third" {
		t.Errorf("after appending to a cut file: %s", jsonString(kinds(us)))
	}
}

// TestCancelRightAfterPrompt: a session/cancel sent right behind its
// prompt cancels it, even when the SDK would deliver the cancel before
// the prompt has begun (it runs them on different goroutines).
func TestCancelRightAfterPrompt(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(t.TempDir())
	cancel := jsonString(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sid}})
	for i := 0; i < 20; i++ {
		id := c.startWith("session/prompt", promptParams(sid, "sleep 30"), cancel)
		start := time.Now()
		resp, _ := c.await(id)
		if string(resp.Result) != `{"stopReason":"cancelled"}` {
			t.Fatalf("prompt %d, cancelled at once, answered %s after %v", i, resp.raw, time.Since(start))
		}
	}
	// A cancel covers only the prompts sent before it.
	if stop, _ := c.prompt(sid, "echo after"); stop != "end_turn" {
		t.Errorf("a prompt after the cancels answered %s", stop)
	}
}

// TestBadMessages: a JSON object that the SDK cannot decode as a
// message, or that names no method, gets an invalid request error (with
// its id when it has a valid one), not silence; an id that ACP does not
// allow is not echoed.
func TestBadMessages(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	for _, b := range []struct{ line, id string }{
		{`{"jsonrpc":"2.0","id":7,"method":""}`, "7"},
		{`{"jsonrpc":"2.0","id":"x","method":5}`, `"x"`},
		{`{"jsonrpc":2,"id":9,"method":"initialize","params":{"protocolVersion":1}}`, "9"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize","params":{"protocolVersion":1}}`, "null"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}`, "null"},
		{`{"jsonrpc":"2.0","id":3,"error":"not an error object"}`, "null"},
	} {
		c.sendRaw(b.line)
		m := c.recv(5 * time.Second)
		var e rpcError
		json.Unmarshal(m.Error, &e)
		if string(m.ID) != b.id || e.Code != -32600 {
			t.Errorf("%s: answered %s, want code -32600 with id %s", b.line, m.raw, b.id)
		}
	}
	// Ids ACP allows are answered with themselves.
	for _, id := range []string{`"s"`, "12", "1e3", "null"} {
		c.sendRaw(`{"jsonrpc":"2.0","id":` + id + `,"method":"no/such_method"}`)
		if id == "null" { // a null id makes it a notification: no answer
			continue
		}
		m := c.recv(5 * time.Second)
		var e rpcError
		json.Unmarshal(m.Error, &e)
		if string(m.ID) != id || e.Code != -32601 {
			t.Errorf("id %s: answered %s", id, m.raw)
		}
	}
	c.initialize(true)
	sid := c.newSession(t.TempDir())
	if stop, _ := c.prompt(sid, "true"); stop != "end_turn" {
		t.Errorf("after bad messages: %s", stop)
	}
}

// TestLoadOfALiveSession: loading a session while its prompt runs replays
// that prompt with its real result, not as a call conch never finished.
func TestLoadOfALiveSession(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	// The command runs until the test releases it, after the load is
	// sent: a command that slept 0.5 s could end before a scan of /proc
	// on a loaded machine ever saw it ("timed out after 5s waiting for
	// the command to start", at load 36).
	release := filepath.Join(t.TempDir(), "release")
	pid := c.start("session/prompt", promptParams(sid, "while [ ! -e "+release+" ]; do sleep 0.05; done; echo done"))
	if first := c.recv(10 * time.Second); get(first.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", first.raw)
	}
	testutil.WaitFor(t, 10*time.Second, "the command to start", func() bool { return len(testutil.Processes(marker)) > 0 })
	lid := c.start("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The load waits for the prompt's turn to end, so the prompt's live
	// result comes first and the replay after it; the prompt's answer is
	// written once its turn has ended, so it may come before, within or
	// after the replay.
	var us []map[string]any
	for answered := 0; answered < 2; {
		m := c.recv(10 * time.Second)
		switch string(m.ID) {
		case pid:
			answered++
			if string(m.Result) != `{"stopReason":"end_turn"}` {
				t.Errorf("the prompt answered %s", m.raw)
			}
		case lid:
			answered++
			if m.Error != nil {
				t.Fatalf("session/load: %s", m.raw)
			}
		default:
			us = append(us, m.update(t))
		}
	}
	us = foldLive(us)
	want := []string{"tool_call_update", "user_message_chunk", "tool_call", "tool_call_update"}
	if d := cmp.Diff(want, kinds(us)); d != "" {
		t.Fatalf("the live result, then the replay (-want +got):\n%s", d)
	}
	live, replayed := us[0], us[1:]
	if d := cmp.Diff(live, replayed[2]); d != "" || get(live, "_meta", "terminal_output", "data") != "done\n" {
		t.Errorf("the replayed result of the prompt in flight differs from the live one (-live +replayed):\n%s%s", d, jsonString(replayed[2]))
	}
}

// TestPromptDuringLoad: a prompt sent right behind the session/load of a
// recorded session either runs in the loaded session, after the load, or,
// when it is handled before the load has begun, finds no session; it never
// meets a half-loaded one.
func TestPromptDuringLoad(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	var sids []string
	for i := 0; i < 20; i++ {
		sid := c.newSession(work)
		c.prompt(sid, "echo one")
		sids = append(sids, sid)
	}
	h.close()

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	ran := 0
	for i, sid := range sids {
		pid := jsonString(fmt.Sprint("p", i))
		prompt := jsonString(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(pid), "method": "session/prompt", "params": promptParams(sid, "echo two")})
		c.mu.Lock()
		c.methods[pid] = "session/prompt"
		c.mu.Unlock()
		lid := c.startWith("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}}, prompt)
		for answered := 0; answered < 2; {
			m := c.recv(10 * time.Second)
			if m.Method != "" {
				continue
			}
			answered++
			var e rpcError
			json.Unmarshal(m.Error, &e)
			switch {
			case string(m.ID) == lid && m.Error != nil:
				t.Fatalf("session/load failed: %s", m.raw)
			case string(m.ID) == pid && m.Error == nil:
				ran++
			case string(m.ID) == pid && e.Code != -32002:
				t.Fatalf("a prompt sent during a load answered %s", m.raw)
			}
		}
	}
	if strings.Contains(h.logs.String(), "panicked") {
		t.Errorf("a handler panicked:\n%s", h.logs.String())
	}
	t.Logf("%d of 20 prompts ran after the load", ran)
}

// TestTwoSessionsAtOnce: the prompts of two sessions run at the same
// time, each drawn in its own session with its own call ids and cwd.
func TestTwoSessionsAtOnce(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	works := map[string]string{}
	var sids []string
	for i := 0; i < 2; i++ {
		w := t.TempDir()
		sid := c.newSession(w)
		works[sid] = w
		sids = append(sids, sid)
	}
	// Each command waits (up to 20 s) for the other to have started: they
	// both end well only if they run at once, however loaded the machine.
	meet := t.TempDir()
	ids := map[string]string{}
	for i, sid := range sids {
		cmd := fmt.Sprintf(": > %[1]s/%[2]d; n=0; until [ -e %[1]s/%[3]d ]; do sleep 0.01; n=$((n+1)); [ $n -lt 2000 ] || exit 9; done; pwd", meet, i, 1-i)
		ids[c.start("session/prompt", promptParams(sid, cmd))] = sid
	}
	updates := map[string][]map[string]any{}
	for answered := 0; answered < 2; {
		m := c.recv(60 * time.Second)
		if m.Method == "session/update" {
			var p struct {
				SessionID string `json:"sessionId"`
			}
			json.Unmarshal(m.Params, &p)
			updates[p.SessionID] = append(updates[p.SessionID], m.update(t))
			continue
		}
		if _, ok := ids[string(m.ID)]; !ok || string(m.Result) != `{"stopReason":"end_turn"}` {
			t.Fatalf("unexpected %s", m.raw)
		}
		answered++
	}
	for _, sid := range sids {
		// The card, then its result; between them, live output when the
		// sampler saw pwd's line before the command's end (a loaded
		// machine): the card's output is the same, in parts.
		us := updates[sid]
		k := kinds(us)
		if len(k) < 2 || k[0] != "tool_call" || slices.ContainsFunc(k[1:], func(s string) bool { return s != "tool_call_update" }) {
			t.Fatalf("session %s: updates %q, want a tool_call, then tool_call_updates", sid, k)
		}
		var out strings.Builder
		for i, u := range us {
			if get(u, "toolCallId") != "call-1" || i > 0 && i < len(us)-1 && get(u, "status") != nil {
				t.Errorf("session %s: update %d: %s", sid, i, jsonString(u))
			}
			if d, ok := get(u, "_meta", "terminal_output", "data").(string); ok {
				out.WriteString(d)
			}
		}
		if get(us[0], "_meta", "terminal_info", "cwd") != works[sid] || get(us[len(us)-1], "status") != "completed" || out.String() != works[sid]+"\n" {
			t.Errorf("session %s: %s", sid, jsonString(us))
		}
	}
}

// TestNoticesRacingShutdown: background tasks that finish while the agent
// shuts down (their notices racing the end of input) neither hang nor
// crash it, and nothing is left behind.
func TestNoticesRacingShutdown(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	for round := 0; round < 5; round++ {
		state := t.TempDir()
		ex, err := local.New(&local.Options{
			Grace:   500 * time.Millisecond,
			Environ: append(os.Environ(), testutil.MarkerEnv+"="+marker),
		})
		if err != nil {
			t.Fatal(err)
		}
		var agent atomic.Pointer[acp.Agent]
		rt := tasks.New(&tasks.Options{OnNotice: func(owner string) {
			if a := agent.Load(); a != nil {
				a.Notify(owner)
			}
		}})
		ts := tools.New(ex, &tools.Options{Tasks: rt, Home: state})
		logs := &syncBuffer{}
		a := acp.NewAgent(ts, &acp.AgentOptions{SessionDir: filepath.Join(state, "sessions"), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		agent.Store(a)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := a.Serve(context.Background(), inR, outW)
			outW.Close()
			done <- err
		}()
		c := newClient(t, inW, outR)
		c.initialize(true)
		sids := []string{c.newSession(t.TempDir()), c.newSession(t.TempDir())}
		for i := 0; i < 4; i++ {
			for _, sid := range sids {
				// Idle notices of the other session may come meanwhile.
				c.call("session/prompt", promptParams(sid, fmt.Sprintf("&sleep 0.0%d", 5+i)))
			}
		}
		time.Sleep(time.Duration(round*15) * time.Millisecond)
		inW.Close()
		for m := range c.in { // idle notices may still come; each must be valid
			if err := c.schema.checkMessage(m.raw, m, ""); err != nil {
				t.Error(err)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Serve did not return")
		}
		rt.Close()
		if err := ex.Close(); err != nil {
			t.Error(err)
		}
		if strings.Contains(logs.String(), "panicked") {
			t.Errorf("round %d: %s", round, logs.String())
		}
	}
}

// TestLoadSnapshotSurvivesInitialize: a loaded session keeps the
// capability of the load, whatever a later initialize says.
func TestLoadSnapshotSurvivesInitialize(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(false)
	sid := c.newSession(work)
	c.prompt(sid, "echo one")
	h.close()

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes := c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	us := c.updates(notes, sid)
	if len(us) != 3 || get(us[1], "_meta", "terminal_info") == nil || get(us[2], "_meta", "terminal_output", "data") != "one\n" {
		t.Fatalf("replay with terminals of a session recorded without: %s", jsonString(us))
	}
	c.initialize(false)
	_, us = c.prompt(sid, "echo two")
	if get(us[0], "_meta", "terminal_info") == nil || get(us[1], "_meta", "terminal_output", "data") != "two\n" || us[1]["content"] != nil {
		t.Errorf("a session loaded with terminals, after an initialize without: %s", jsonString(us))
	}
}

// TestPlantedSessionFiles: a session/load of a session whose file is not
// a regular file (a link to a file outside, a FIFO, /dev/zero behind a
// link, a folder) is refused at once with an error naming the file; the
// link's target is not written to, and the agent goes on and still ends
// at the end of its input.
func TestPlantedSessionFiles(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	dir := filepath.Join(state, "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	target := `{"type":"session","session":"sess_link","cwd":"/","version":1}` + "\n" + `{"type":"prompt","text":"echo hi"}`
	if err := os.WriteFile(outside, []byte(target), 0o600); err != nil {
		t.Fatal(err)
	}
	for id, plant := range map[string]func(p string) error{
		"sess_link": func(p string) error { return os.Symlink(outside, p) },
		"sess_fifo": func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"sess_zero": func(p string) error { return os.Symlink("/dev/zero", p) },
		"sess_dir":  func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		if err := plant(filepath.Join(dir, id+".jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	for _, id := range []string{"sess_link", "sess_fifo", "sess_zero", "sess_dir"} {
		m, _ := c.awaitWithin(c.start("session/load", map[string]any{"sessionId": id, "cwd": work, "mcpServers": []any{}}), 10*time.Second)
		var e rpcError
		json.Unmarshal(m.Error, &e)
		path := filepath.Join(dir, id+".jsonl")
		if msg := fmt.Sprint(e.Data["error"]); m.Error == nil || !strings.Contains(msg, path) || !strings.Contains(msg, "not a regular file") {
			t.Errorf("load of %s answered %s, want an error naming %s as not a regular file", id, m.raw, path)
		}
		// Not loaded: a prompt finds no session, and writes nowhere.
		if e := c.callErr("session/prompt", promptParams(id, "echo hi")); e.Code != -32002 {
			t.Errorf("prompt for the refused %s: %+v", id, e)
		}
	}
	if got, _ := os.ReadFile(outside); string(got) != target {
		t.Errorf("the link's target was written to: %q", got)
	}
	if stop, _ := c.prompt(c.newSession(work), "true"); stop != "end_turn" {
		t.Errorf("after the refused loads: %s", stop)
	}
	h.close()
}

// answers reads messages until each request of ids is answered, and
// returns the answers by id and the updates in the order they came, the
// live output of each terminal card folded into its final update (see
// foldLive): a command's output may or may not make a live update before
// the command ends, as the machine's load has it.
func (c *client) answers(ids ...string) (map[string]message, []map[string]any) {
	c.t.Helper()
	got := map[string]message{}
	var us []map[string]any
	for len(got) < len(ids) {
		m := c.recv(20 * time.Second)
		if m.Method == "session/update" {
			us = append(us, m.update(c.t))
			continue
		}
		if !slices.Contains(ids, string(m.ID)) {
			c.t.Fatalf("unexpected %s", m.raw)
		}
		got[string(m.ID)] = m
	}
	return got, foldLive(us)
}

// TestQueuedPrompts: prompts sent while one runs wait for it, in the
// order sent, and each gets its own answer; none cancels another.
func TestQueuedPrompts(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	p1 := c.start("session/prompt", promptParams(sid, "until [ -e go ]; do sleep 0.01; done; echo one"))
	if m := c.recv(10 * time.Second); get(m.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", m.raw)
	}
	p2 := c.start("session/prompt", promptParams(sid, "echo two"))
	p3 := c.start("session/prompt", promptParams(sid, "echo three"))
	// The first command ends once the agent has read the others.
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, us := c.answers(p1, p2, p3)
	for _, id := range []string{p1, p2, p3} {
		if string(got[id].Result) != `{"stopReason":"end_turn"}` {
			t.Errorf("prompt %s answered %s", id, got[id].raw)
		}
	}
	want := []string{"tool_call_update", "tool_call", "tool_call_update", "tool_call", "tool_call_update"}
	if d := cmp.Diff(want, kinds(us)); d != "" {
		t.Fatalf("updates after the first call (-want +got):\n%s", d)
	}
	for i, out := range []string{"one\n", "two\n", "three\n"} {
		u := us[2*i]
		if id := fmt.Sprint("call-", i+1); get(u, "toolCallId") != id || get(u, "_meta", "terminal_output", "data") != out {
			t.Errorf("result %d: %s, want %s with %q", i+1, jsonString(u), id, out)
		}
	}
}

// TestCancelWithQueuedPrompts: session/cancel kills the running command
// and cancels the prompts queued behind it, which answer cancelled
// without running; a prompt sent after the cancel runs.
func TestCancelWithQueuedPrompts(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	p1 := c.start("session/prompt", promptParams(sid, "sleep 30"))
	if m := c.recv(10 * time.Second); get(m.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", m.raw)
	}
	testutil.WaitFor(t, 5*time.Second, "the command to start", func() bool { return len(testutil.Processes(marker)) > 0 })
	p2 := c.start("session/prompt", promptParams(sid, "touch queued"))
	start := time.Now()
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	p3 := c.start("session/prompt", promptParams(sid, "echo after"))
	got, us := c.answers(p1, p2, p3)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the cancel took %v", took)
	}
	for id, want := range map[string]string{p1: "cancelled", p2: "cancelled", p3: "end_turn"} {
		if string(got[id].Result) != `{"stopReason":"`+want+`"}` {
			t.Errorf("prompt %s answered %s, want %s", id, got[id].raw, want)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "queued")); err == nil {
		t.Error("the queued prompt ran after the cancel")
	}
	if n := len(us); n == 0 || get(us[n-1], "_meta", "terminal_output", "data") != "after\n" {
		t.Errorf("the prompt after the cancel: %s", jsonString(us))
	}
}

// TestQueuedPromptsAtEOF: at the end of input, the running prompt and
// those queued behind it are all answered cancelled; the queued commands
// never run.
func TestQueuedPromptsAtEOF(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	work := t.TempDir()
	sid := c.newSession(work)
	p1 := c.start("session/prompt", promptParams(sid, "sleep 30"))
	if m := c.recv(10 * time.Second); get(m.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", m.raw)
	}
	p2 := c.start("session/prompt", promptParams(sid, "touch queued"))
	p3 := c.start("session/prompt", promptParams(sid, "touch queued"))
	c.w.Close()
	h.closed = true
	got := map[string]string{}
	for m := range c.in {
		if m.Method == "" {
			got[string(m.ID)] = string(m.Result)
		}
	}
	select {
	case err := <-h.done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	// The SDK writes the running prompt's answer after Prompt returns, so
	// it may come too late for an output that closes as Serve returns.
	if r, ok := got[p1]; !ok {
		t.Logf("the running prompt's answer came after the output closed")
	} else if r != `{"stopReason":"cancelled"}` {
		t.Errorf("the running prompt answered %s", r)
	}
	delete(got, p1)
	want := map[string]string{p2: `{"stopReason":"cancelled"}`, p3: `{"stopReason":"cancelled"}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("answers at the end of input (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(work, "queued")); err == nil {
		t.Error("a queued prompt ran after the end of input")
	}
	h.rt.Close()
	h.ex.Close()
}
