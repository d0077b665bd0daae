//go:build linux

package acp_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/acp"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// goldenDir holds one file per case: the case's session/update
// notifications, indented, one after the other.
const goldenDir = "testdata/golden"

func args(kv ...any) json.RawMessage {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return b
}

func intp(n int) *int       { return &n }
func strp(s string) *string { return &s }

// A golden case draws one call and, usually, its result.
type goldenCase struct {
	name string
	snap acp.Snapshot
	run  func(b *acp.Bridge) []sdk.SessionUpdate
}

// bashPair draws a call of tool with a and its one-text result.
func pair(tool string, a json.RawMessage, text string, isError bool) func(b *acp.Bridge) []sdk.SessionUpdate {
	return func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.Call("call-1", tool, a),
			b.Result("call-1", tool, a, []string{text}, isError),
		}
	}
}

var (
	on  = acp.Snapshot{Terminal: true, Cwd: "/work/proj"}
	off = acp.Snapshot{Terminal: false, Cwd: "/work/proj"}
	hi  = args("command", "echo hi", "description", "Greet the world")
)

var goldenCases = []goldenCase{
	// Terminal on and off, for each way a command ends.
	{"terminal_on_exit_0", on, pair(tools.NameBash, hi, "hi\n", false)},
	{"terminal_off_exit_0", off, pair(tools.NameBash, hi, "hi\n", false)},
	{"terminal_on_exit_code", on, pair(tools.NameBash, args("command", "exit 3", "description", "Fail on purpose"), "failing\n[exit code: 3]", false)},
	{"terminal_off_exit_code", off, pair(tools.NameBash, args("command", "exit 3", "description", "Fail on purpose"), "failing\n[exit code: 3]", false)},
	{"terminal_on_signal", on, pair(tools.NameBash, args("command", "sleep 9", "description", "Time out", "timeoutMs", 100),
		"(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", false)},
	{"terminal_off_signal", off, pair(tools.NameBash, args("command", "sleep 9", "description", "Time out", "timeoutMs", 100),
		"(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", false)},
	// A text with no exit marker is an exit 0, even when it merely ends
	// in marker-like text with no newline before it.
	{"terminal_on_no_exit_marker", on, pair(tools.NameBash, args("command", "printf 'x[exit code: 5]'", "description", "Print a fake marker"), "x[exit code: 5]", false)},
	// A view with output but neither exit code nor signal: no exit pill.
	{"terminal_on_view_without_exit", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.CallView("call-1", tools.View{Card: tools.CardTerminal, Title: "tail -f log"}),
			b.ResultView("call-1", tools.View{Card: tools.CardTerminal, Output: strp("partial")}, false),
		}
	}},
	// A view with no output: data "".
	{"terminal_on_missing_output", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.CallView("call-1", tools.View{Card: tools.CardTerminal, Title: "true"}),
			b.ResultView("call-1", tools.View{Card: tools.CardTerminal, ExitCode: intp(0)}, false),
		}
	}},
	{"terminal_off_missing_output", off, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.CallView("call-1", tools.View{Card: tools.CardTerminal, Title: "true"}),
			b.ResultView("call-1", tools.View{Card: tools.CardTerminal, ExitCode: intp(0)}, false),
		}
	}},
	// The cwd of terminal_info is always absolute.
	{"cwd_relative", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{b.Call("call-1", tools.NameBash, args("command", "ls", "description", "List", "workdir", "sub/dir"))}
	}},
	{"cwd_absolute", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{b.Call("call-1", tools.NameBash, args("command", "ls", "description", "List", "workdir", "/srv/data"))}
	}},
	{"cwd_missing", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{b.Call("call-1", tools.NameBash, args("command", "ls", "description", "List"))}
	}},
	// With no session cwd a relative workdir cannot be made absolute: the
	// cwd is left out rather than sent relative.
	{"cwd_relative_without_session_cwd", acp.Snapshot{Terminal: true}, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{b.Call("call-1", tools.NameBash, args("command", "ls", "description", "List", "workdir", "sub"))}
	}},
	// The orphan guard: a terminal result for a call not drawn as a
	// terminal (a generic call, or no call at all) is text.
	{"orphan_after_generic_call", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.CallView("call-1", tools.View{Card: tools.CardGeneric, Title: "echo hi", Kind: "execute", RawInput: "echo hi", Content: []string{"Greet"}}),
			b.ResultView("call-1", tools.View{Card: tools.CardTerminal, Output: strp("hi\n"), ExitCode: intp(0)}, false),
		}
	}},
	{"orphan_without_call", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		return []sdk.SessionUpdate{
			b.ResultView("call-9", tools.View{Card: tools.CardTerminal, Output: strp("hi\n"), ExitCode: intp(0)}, false),
		}
	}},
	// Background call and acknowledgement, and error results: generic.
	{"background_call_and_ack", on, pair(tools.NameBash, args("command", "sleep 1; echo bg", "description", "Run in the background", "run_in_background", true),
		"started background task bash-1", false)},
	{"error_result_terminal_on", on, pair(tools.NameBash, hi, "Error: tool call aborted", true)},
	{"error_result_terminal_off", off, pair(tools.NameBash, hi, "Error: tool call aborted", true)},
	{"yielded_result", on, pair(tools.NameBash, args("command", "make", "description", "Build"),
		"compiling\n[still running after 45000ms; moved to background task bash-2: read it with task_output, stop it with task_kill]", false)},
	// The description-less call: no description block.
	{"no_description_terminal_on", on, pair(tools.NameBash, args("command", "pwd"), "/work/proj\n", false)},
	{"no_description_terminal_off", off, pair(tools.NameBash, args("command", "pwd"), "/work/proj\n", false)},
	// The task tools.
	{"task_output", on, pair(tools.NameTaskOutput, args("task_id", "bash-1"), "bg\n[status: completed, exit code: 0]", false)},
	{"task_list", on, pair(tools.NameTaskList, args(), "bash-1 [bash] completed — sleep 1; echo bg", false)},
	{"task_kill", on, pair(tools.NameTaskKill, args("task_id", "bash-1"), "requested cancellation of task bash-1", false)},
	{"task_output_error", on, pair(tools.NameTaskOutput, args("task_id", "bash-7"), "Error: unknown task bash-7", true)},
	// What no presenter can draw: malformed arguments, an unknown tool, a
	// result of several blocks.
	{"malformed_bash_args", on, pair(tools.NameBash, json.RawMessage(`{"cmd":"ls"}`), "Error: invalid command: expected a non-empty string", true)},
	{"unknown_tool", on, func(b *acp.Bridge) []sdk.SessionUpdate {
		a := args("x", 1)
		return []sdk.SessionUpdate{
			b.Call("call-1", "frobnicate", a),
			b.Result("call-1", "frobnicate", a, []string{"one", "two"}, false),
		}
	}},
}

func TestGoldenShapes(t *testing.T) {
	schema := loadSchema(t)
	seen := map[string]bool{}
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			if seen[c.name] {
				t.Fatalf("duplicate case %s", c.name)
			}
			seen[c.name] = true
			var buf bytes.Buffer
			for _, u := range c.run(acp.NewBridge(c.snap)) {
				n := sdk.SessionNotification{SessionId: "sess_golden", Update: u}
				raw, err := json.Marshal(n)
				if err != nil {
					t.Fatal(err)
				}
				if err := schema.check("SessionNotification", raw); err != nil {
					t.Error(err)
				}
				json.Indent(&buf, raw, "", "  ")
				buf.WriteByte('\n')
			}
			path := filepath.Join(goldenDir, c.name+".json")
			testutil.Golden(t, path, buf.String())
		})
	}
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".json"); !seen[name] {
			t.Errorf("%s has no case (remove it)", f)
		}
	}
}

// TestGoldenContract pins the contract's promises on the shapes, so that
// a golden file rewritten by -update cannot quietly break them.
func TestGoldenContract(t *testing.T) {
	enc := func(u sdk.SessionUpdate) map[string]any {
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	b := acp.NewBridge(on)
	call := enc(b.Call("c1", tools.NameBash, hi))
	res := enc(b.Result("c1", tools.NameBash, hi, []string{"hi\n"}, false))
	wantCall := map[string]any{
		"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "echo hi", "kind": "execute", "status": "in_progress", "rawInput": "echo hi",
		"content": []any{
			map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "Greet the world"}},
			map[string]any{"type": "terminal", "terminalId": "c1"},
		},
		"_meta": map[string]any{"terminal_info": map[string]any{"terminal_id": "c1", "cwd": "/work/proj"}},
	}
	if d := cmp.Diff(wantCall, call); d != "" {
		t.Errorf("terminal call (-want +got):\n%s", d)
	}
	wantRes := map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
		"_meta": map[string]any{
			"terminal_output": map[string]any{"terminal_id": "c1", "data": "hi\n"},
			"terminal_exit":   map[string]any{"terminal_id": "c1", "exit_code": float64(0)},
		},
	}
	if d := cmp.Diff(wantRes, res); d != "" {
		t.Errorf("terminal result (-want +got):\n%s", d)
	}

	b = acp.NewBridge(off)
	call = enc(b.Call("c1", tools.NameBash, hi))
	res = enc(b.Result("c1", tools.NameBash, hi, []string{"hi\n"}, false))
	delete(wantCall, "_meta")
	wantCall["content"] = wantCall["content"].([]any)[:1]
	if d := cmp.Diff(wantCall, call); d != "" {
		t.Errorf("call without terminals (-want +got):\n%s", d)
	}
	wantRes = map[string]any{
		"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
		"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "```console\nhi\n```"}}},
	}
	if d := cmp.Diff(wantRes, res); d != "" {
		t.Errorf("result without terminals (-want +got):\n%s", d)
	}

	// Status: failed for errors, non-zero exits and signals.
	for _, c := range []struct {
		text    string
		isError bool
		status  string
	}{
		{"ok\n", false, "completed"},
		{"(no output)\n[timed out after 1000ms]", false, "completed"},
		{"x\n[exit code: 1]", false, "failed"},
		{"(no output)\n[killed by signal: SIGKILL]", false, "failed"},
		{"Error: tool call aborted", true, "failed"},
	} {
		b := acp.NewBridge(on)
		b.Call("c", tools.NameBash, hi)
		if got := enc(b.Result("c", tools.NameBash, hi, []string{c.text}, c.isError))["status"]; got != c.status {
			t.Errorf("status of %q (isError %v) = %v, want %s", c.text, c.isError, got, c.status)
		}
	}
}

// TestTerminalOutputCapability: only a JSON true opts in.
func TestTerminalOutputCapability(t *testing.T) {
	for _, c := range []struct {
		meta map[string]any
		want bool
	}{
		{nil, false},
		{map[string]any{"terminal_output": true}, true},
		{map[string]any{"terminal_output": false}, false},
		{map[string]any{"terminal_output": "true"}, false},
		{map[string]any{"terminal_output": 1}, false},
	} {
		if got := acp.TerminalOutput(sdk.ClientCapabilities{Meta: c.meta}); got != c.want {
			t.Errorf("TerminalOutput(%v) = %v, want %v", c.meta, got, c.want)
		}
	}
}

// FuzzBridge: the bridge never panics and always emits valid JSON that
// the ACP schema accepts, whatever the arguments and result.
func FuzzBridge(f *testing.F) {
	f.Add("bash", `{"command":"ls","workdir":"a"}`, "x\n[exit code: 2]", false, true)
	f.Add("bash", `{"command":"ls","run_in_background":true}`, "started background task bash-1", false, false)
	f.Add("task_output", `{"task_id":""}`, "Error: x", true, true)
	f.Add("bash", `not json`, "\x00\xff", false, true)
	schema := loadSchema(f)
	f.Fuzz(func(t *testing.T, tool, a, text string, isError, terminal bool) {
		b := acp.NewBridge(acp.Snapshot{Terminal: terminal, Cwd: "/w"})
		for _, u := range []sdk.SessionUpdate{
			b.Call("c", tool, json.RawMessage(a)),
			b.Result("c", tool, json.RawMessage(a), []string{text}, isError),
		} {
			raw, err := json.Marshal(sdk.SessionNotification{SessionId: "s", Update: u})
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !json.Valid(raw) {
				t.Fatalf("invalid JSON %q", raw)
			}
			if err := schema.check("SessionNotification", raw); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestSchemaCatchesBadShapes: the schema checks can fail (a validator
// that accepts everything would make every other check vacuous).
func TestSchemaCatchesBadShapes(t *testing.T) {
	schema := loadSchema(t)
	if schema == nil {
		t.Skip(skipSchemaEnv + "=1")
	}
	for _, bad := range []string{
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"done"}}`,
		`{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c","title":"t","content":[{"type":"terminal"}]}}`,
		`{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}`,
	} {
		if schema.check("SessionNotification", []byte(bad)) == nil {
			t.Errorf("the schema accepts %s", bad)
		}
	}
	if err := schema.check("PromptResponse", []byte(`{"stopReason":"finished"}`)); err == nil {
		t.Errorf("the schema accepts an unknown stop reason")
	}
	// The whole-message check too: an id ACP does not allow, a wrong
	// jsonrpc version.
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":{"x":1},"error":{"code":-32600,"message":"Invalid request"}}`,
		`{"jsonrpc":"1.0","id":1,"error":{"code":-32600,"message":"Invalid request"}}`,
	} {
		var m message
		json.Unmarshal([]byte(bad), &m)
		if schema.checkMessage([]byte(bad), m, "") == nil {
			t.Errorf("the schema accepts the message %s", bad)
		}
	}
	good := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}`
	var m message
	json.Unmarshal([]byte(good), &m)
	if err := schema.checkMessage([]byte(good), m, ""); err != nil {
		t.Errorf("the schema refuses an error with a null id: %v", err)
	}
}

// TestTerminalInfoHost checks that a call on a remote host draws its
// terminal card's cwd as <host>:<cwd>: the workdir as given (a relative
// one joined to the host's cwd, else to its home), else the host's
// configured cwd, else ~. A call on local is drawn as without hosts.
func TestTerminalInfoHost(t *testing.T) {
	snap := acp.Snapshot{Terminal: true, Cwd: "/work/proj", HostCwds: map[string]string{"gpu1": "/srv/train"}}
	cases := []struct {
		args json.RawMessage
		want string
	}{
		{args("command", "ls", "host", "gpu1"), "gpu1:/srv/train"},
		{args("command", "ls", "host", "gpu1", "workdir", "/data"), "gpu1:/data"},
		{args("command", "ls", "host", "gpu1", "workdir", "sub"), "gpu1:/srv/train/sub"},
		{args("command", "ls", "host", "gpu1", "workdir", "~/x"), "gpu1:~/x"},
		{args("command", "ls", "host", "build"), "build:~"},
		{args("command", "ls", "host", "build", "workdir", "sub"), "build:~/sub"},
		{args("command", "ls", "host", "build", "workdir", "~"), "build:~"},
		{args("command", "ls", "host", "local", "workdir", "sub"), "/work/proj/sub"},
		{args("command", "ls", "host", "local"), "/work/proj"},
	}
	for _, c := range cases {
		u := acp.NewBridge(snap).Call("c1", tools.NameBash, c.args)
		info, _ := u.ToolCall.Meta["terminal_info"].(map[string]any)
		if got := info["cwd"]; got != c.want {
			t.Errorf("%s: terminal_info.cwd = %v, want %q", c.args, got, c.want)
		}
	}
}
