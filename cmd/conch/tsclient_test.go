//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// tsClientDir holds the script that drives conch serve with the official
// TypeScript MCP client, and the npm lock that pins it.
const tsClientDir = "../../mcpserver/testdata/ts-client"

// TestTSClient runs the built binary under the official TypeScript MCP
// client (@modelcontextprotocol/sdk, pinned in tsClientDir), over stdio
// and over streamable HTTP, and checks what the client saw. The client
// validates every structuredContent against the tool's outputSchema and
// throws when it does not match, so getting through the calls is part of
// the test. It needs node, and npm to install the client in tsClientDir
// on first use; CONCH_SKIP_TS_CLIENT=1 skips it.
func TestTSClient(t *testing.T) {
	skipTSClient(t)
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Outside the writable roots (the temp dirs among them) of the
	// servers' default sandbox, and writable by their user.
	denied, err := os.MkdirTemp("/var/tmp", "conch-ts-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(denied) })
	stdout, stderr := runTSClient(t, marker, "script.mjs", testutil.ConchBinary(t), root, denied)
	if strings.Contains(stderr, "unknown message ID") {
		t.Errorf("the TypeScript client warned of a response to an unknown request:\n%s", stderr)
	}
	var out map[string]map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("script output: %v\n%s", err, stdout)
	}
	for _, tr := range []string{"stdio", "http"} {
		t.Run(tr, func(t *testing.T) {
			got := out[tr]
			if got == nil {
				t.Fatalf("no %s result in %s", tr, stdout)
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("conch serve logs:\n%s", got["logs"])
				}
			})
			if f, ok := got["fatal"]; ok {
				t.Fatalf("the TypeScript client failed: %s", f)
			}
			checkTSClient(t, tr, scrubTiming(got).(map[string]any), root, denied)
		})
	}
}

// scrubTiming replaces what varies with a task's run time: elapsedMs
// values read "<ms>", and run times in texts "<T>" (testutil.NoElapsed).
func scrubTiming(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "elapsedMs" {
				x[k] = "<ms>"
			} else {
				x[k] = scrubTiming(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = scrubTiming(x[i])
		}
	case string:
		return testutil.NoElapsed(x)
	}
	return v
}

func checkTSClient(t *testing.T, tr string, got map[string]any, root, denied string) {
	t.Helper()
	expect := func(path string, want any) {
		t.Helper()
		var v any = got
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
	}
	type list = []any
	type obj = map[string]any

	expect("protocolVersion", "2025-11-25")
	expect("server", "conch")
	expect("tools", list{"bash", "task_output", "task_list", "task_kill", "task_input"})
	expect("withOutputSchema", list{"bash", "task_output", "task_list", "task_kill", "task_input"})
	// On its default sandbox, with escalation ask, bash offers to run
	// outside it (docs/sandbox.md#escalation).
	expect("bashInputProperties", list{"command", "description", "timeoutMs", "workdir", "run_in_background", "tty", "outside_sandbox", "justification"})

	// conch serve runs under its default sandbox (docs/sandbox.md).
	noDenial := obj{"mode": "workspace-write", "network": "public", "denied": list{}}
	expect("echo", obj{
		"texts": list{"hello\n"}, "isError": false,
		"structuredContent": obj{
			"text": "hello\n", "kind": "foreground", "exitCode": 0.0, "signal": nil, "timedOut": false, "aborted": false, "timeoutMs": 120000.0,
			"stdout":  obj{"truncated": false, "bytes": 6.0, "lines": 1.0},
			"stderr":  obj{"truncated": false, "bytes": 0.0, "lines": 0.0},
			"sandbox": noDenial,
		},
	})
	expect("exit3", obj{"texts": list{"out\n[stderr]\nerr\n[exit code: 3]"}, "isError": false, "exitCode": 3.0})
	expect("invalid", obj{"texts": list{"Error: invalid description: expected a non-empty string"}, "isError": true})
	expect("pwd", list{root + "\n"})

	expect("background", obj{
		"start":       list{"started background task bash-1"},
		"startValue":  obj{"text": "started background task bash-1", "kind": "background", "taskId": "bash-1"},
		"output":      list{"done\n[status: completed, exit code: 0]"},
		"outputValue": obj{"text": "done\n[status: completed, exit code: 0]", "taskId": "bash-1", "status": "completed", "detail": "exit code: 0", "exitCode": 0.0, "elapsedMs": "<ms>", "sandbox": noDenial},
	})
	expect("taskList", obj{
		"texts": list{"bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo done"},
		"structuredContent": obj{"text": "bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo done", "tasks": list{
			obj{"id": "bash-1", "kind": "bash", "status": "completed", "detail": "exit code: 0", "exitCode": 0.0, "elapsedMs": "<ms>", "label": "sleep 0.3; echo done"},
		}},
	})
	const notice = "background task bash-2 (bash: echo x) finished [status: completed, exit code: 0] after <T>. Last output:\nx\nRead all of it with task_output."
	if n, _ := got["notice"].(map[string]any); n["onStart"] == true {
		// The task ended before its start's own result was made (a
		// loaded machine left the call waiting): the notice rode on it,
		// and the call after it had none.
		expect("notice", obj{"taskId": "bash-2", "onStart": true, "texts": list{"started background task bash-2", notice},
			"valueText": "started background task bash-2\n\n" + notice, "nextBlocks": 1.0})
	} else {
		expect("notice", obj{"taskId": "bash-2", "texts": list{
			"bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo done\nbash-2 [bash] completed, exit code: 0, <T> — echo x",
			notice,
		}, "valueText": "bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo done\nbash-2 [bash] completed, exit code: 0, <T> — echo x\n\n" + notice})
	}

	// 2.5 s of ticks: a report after each full second, never two within
	// a second of the server's elapsed time (which each report carries:
	// the client's arrival times bunch up when its event loop is late,
	// 830 ms apart seen beside two CPU burners).
	expect("progress.texts", list{strings.Repeat("tick\n", 5)})
	expect("progress.increasing", true)
	if n, _ := got["progress"].(map[string]any)["count"].(float64); n < 2 || n > 3 {
		t.Errorf("%v progress notifications for a 2.5 s command, want 2 or 3", n)
	}
	if gap, _ := got["progress"].(map[string]any)["minGapMs"].(float64); gap < 900 {
		t.Errorf("two progress notifications %v ms apart, want at least a second", gap)
	}

	// 100 MB of mixed output: one block within the 30,000-byte budget (the
	// cut lines' ellipses are one character, three bytes), both streams
	// cut, and a structured value whose text is the block's, within the
	// budget as JSON.stringify gives it.
	expect("large.blocks", 1.0)
	expect("large.cutLines", 2.0)
	expect("large.valueIsText", true)
	if large, _ := got["large"].(map[string]any); large == nil {
		t.Error("no large-output result")
	} else {
		text, st := large["textChars"].(float64), large["structuredChars"].(float64)
		t.Logf("100 MB of output: %v characters of text, %v in the structured value", text, st)
		if text < 25000 || st > 30000 {
			t.Errorf("100 MB of output: %v characters of text, %v in the structured value; want most of the 30,000 used, the value within it", text, st)
		}
	}

	expect("cancel.answer", nil) // a cancelled request gets no response
	expect("cancel.after", list{"still here\n"})
	if e, _ := got["cancel"].(map[string]any)["error"].(string); !strings.Contains(e, "cancelled by the test") {
		t.Errorf("the aborted call: %q, want it rejected with the abort reason", e)
	}
	if ms, _ := got["cancel"].(map[string]any)["deadAfterMs"].(float64); ms < 0 || ms > 2000 {
		t.Errorf("the cancelled command's group died %v ms after the abort (-1: it survived)", ms)
	}

	expect("kill", obj{
		"taskId": "bash-3",
		"texts":  list{"killed task bash-3 [status: killed, signal: SIGTERM]"},
		"value":  obj{"text": "killed task bash-3 [status: killed, signal: SIGTERM]", "taskId": "bash-3", "status": "killed", "detail": "signal: SIGTERM", "signal": "SIGTERM", "elapsedMs": "<ms>", "alreadyFinished": false},
		"output": list{"(no new output)\n[status: killed, signal: SIGTERM]"},
	})

	const yieldMarker = "[still running after 3000ms; moved to background task bash-4 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]"
	expect("yield.value", func() any {
		// The value's text is the result's; its stdout counts the output so
		// far.
		v, _ := got["yield"].(map[string]any)["value"].(map[string]any)
		texts, _ := got["yield"].(map[string]any)["texts"].([]any)
		stdout, _ := v["stdout"].(map[string]any)
		if v["kind"] == "yielded" && v["taskId"] == "bash-4" && v["yieldedAfterMs"] == 3000.0 && v["timeoutMs"] == 120000.0 &&
			len(texts) == 1 && v["text"] == texts[0] && stdout["bytes"] == float64(len(strings.TrimSuffix(fmt.Sprint(texts[0]), yieldMarker))) {
			return v
		}
		return "a yielded value of bash-4 whose text is the result's and whose stdout counts the bytes before the marker"
	}())
	expect("yield.final", func() any {
		final, _ := got["yield"].(map[string]any)["final"].([]any)
		if len(final) == 1 {
			if s, ok := final[0].(string); ok && strings.HasSuffix(s, "[status: completed, exit code: 0]") {
				return final
			}
		}
		return "a final read ending in [status: completed, exit code: 0]"
	}())
	yielded, _ := got["yield"].(map[string]any)["texts"].([]any)
	var all strings.Builder
	if len(yielded) != 1 || !strings.HasSuffix(fmt.Sprint(yielded[0]), yieldMarker) {
		t.Errorf("yielded result %q, want one block ending in %q", yielded, yieldMarker)
	} else {
		all.WriteString(strings.TrimSuffix(fmt.Sprint(yielded[0]), yieldMarker))
	}
	reads, _ := got["yield"].(map[string]any)["reads"].([]any)
	for _, r := range reads {
		all.WriteString(fmt.Sprint(r))
	}
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if all.String() != want.String() {
		t.Errorf("yielded output + task_output reads:\n%q\nwant\n%q", all.String(), want.String())
	}

	// The denied write: its marker before the exit marker of the result
	// and before the status line of the task's read, and the path in both
	// values.
	path := denied + "/" + tr
	body := "[stderr]\ntouch: cannot touch '" + path + "': Permission denied\n"
	marker := "[sandbox: write to " + path + " denied under workspace-write mode; writable: "
	deniedValue := obj{"mode": "workspace-write", "network": "public", "denied": list{obj{"path": path, "op": "write"}}}
	for _, c := range []struct{ key, end string }{{"denied.texts", "[exit code: 1]"}, {"denied.task", "[status: completed, exit code: 1]"}} {
		expect(c.key, func() any {
			texts, _ := got["denied"].(map[string]any)[strings.TrimPrefix(c.key, "denied.")].([]any)
			if len(texts) == 1 {
				s, _ := texts[0].(string)
				rest, ok := strings.CutPrefix(s, body+marker)
				if ok && strings.HasSuffix(rest, "]\n"+c.end) && !strings.Contains(strings.TrimSuffix(rest, "]\n"+c.end), "\n") {
					return texts
				}
			}
			return body + marker + "…]\n" + c.end
		}())
	}
	expect("denied.sandbox", deniedValue)
	expect("denied.taskSandbox", deniedValue)

	// No client error: in particular no "Received a response for an
	// unknown message ID", which an answer to the cancelled call causes.
	if errs, _ := got["errors"].([]any); len(errs) > 0 {
		t.Errorf("client errors: %q", errs)
	}
	if ms, _ := got["exit"].(map[string]any)["afterMs"].(float64); ms > 2000 {
		t.Errorf("conch serve took %v ms to exit", ms)
	}
	expect("exit.code", 0.0)
	expect("exit.signal", nil)

	if tr != "http" {
		return
	}
	expect("url", func() any {
		if u, _ := got["url"].(string); strings.HasPrefix(u, "http://127.0.0.1:") {
			return u
		}
		return "http://127.0.0.1:<port>/mcp"
	}())
	expect("transportProtocolVersion", "2025-11-25")
	expect("noToken", 401.0)
	expect("wrongToken", 401.0)
	expect("foreignOrigin", 403.0)
	expect("otherSession", obj{"texts": list{"Error: task bash-1 belongs to another session"}, "isError": true, "list": list{"(no background tasks)"}})
	if ms, _ := got["terminate"].(map[string]any)["deadAfterMs"].(float64); ms < 0 || ms > 2000 {
		t.Errorf("the closed session's task died %v ms after the DELETE (-1: it survived)", ms)
	}
	if ms, _ := got["terminate"].(map[string]any)["deletedAfterMs"].(float64); ms > 2000 {
		t.Errorf("the DELETE took %v ms", ms)
	}
	expect("stdout", "")
}

// skipTSClient skips t when CONCH_SKIP_TS_CLIENT=1.
func skipTSClient(t *testing.T) {
	if os.Getenv("CONCH_SKIP_TS_CLIENT") == "1" {
		t.Skip("CONCH_SKIP_TS_CLIENT=1")
	}
}

// runTSClient runs a script of the official TypeScript MCP client
// (tsClientDir, installed on first use) with node, its processes carrying
// marker, and returns what it printed. A missing node or npm, or a script
// that fails, fails t.
func runTSClient(t *testing.T, marker, script string, args ...string) (stdout, stderr string) {
	t.Helper()
	if _, err := testutil.NPMFixture(tsClientDir); err != nil {
		t.Fatalf("the TypeScript MCP client: %v (or set CONCH_SKIP_TS_CLIENT=1 to skip this test)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to run the TypeScript MCP client (or set CONCH_SKIP_TS_CLIENT=1 to skip this test): %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = tsClientDir
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, errb.String(), out.String())
	}
	return out.String(), errb.String()
}
