//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestE2E runs every scenario over both transports: stdio against the
// built binary, and streamable HTTP against httptest, each time with a
// go-sdk client.
func TestE2E(t *testing.T) {
	scenarios := []struct {
		name string
		run  func(t *testing.T, tr transport)
	}{
		{"ListTools", testListTools},
		{"Foreground", testForeground},
		{"ToolError", testToolError},
		{"BackgroundWait", testBackgroundWait},
		{"TaskKill", testTaskKill},
		{"Cancel", testCancel},
		{"Progress", testProgress},
		{"ProgressTTY", testProgressTTY},
		{"Yield", testYield},
		{"CompletionNotice", testCompletionNotice},
		{"NoticeAfterCancel", testNoticeAfterCancel},
		{"HeldNoticeCollected", testHeldNoticeCollected},
		{"RootsCwd", testRootsCwd},
		{"NoRootsCwd", testNoRootsCwd},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, tr)
				})
			}
		})
	}
}

// referenceTools is what every conch server with a task runtime lists:
// conch serve caps task_output's wait at mcpserver.MaxWait.
func referenceTools(t *testing.T) []tools.Tool {
	ex, err := local.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	// conch serve's own yield window and wait cap: the descriptions state them.
	return tools.New(ex, &tools.Options{Tasks: tasks.New(nil), YieldAfter: 45 * time.Second, MaxWait: mcpserver.MaxWait}).Tools()
}

// servedTools is what conch serve lists on this machine's defaults: a
// workspace-write sandbox on the public network that commands may leave
// with the user's yes, whose temp directories and caches are writable,
// and the scrub of this process's environment (docs/tools.md#description).
func servedTools(t *testing.T, writable []string) []tools.Tool {
	ex, err := local.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	return tools.New(ex, &tools.Options{Tasks: tasks.New(nil), YieldAfter: 45 * time.Second, MaxWait: mcpserver.MaxWait,
		Unsandboxed: ex, Scrubbed: ex.Scrubbed(),
		Sandbox: tools.Sandbox{Mode: "workspace-write", Network: "public", Enforced: true, Writable: writable}}).Tools()
}

func testListTools(t *testing.T, tr transport) {
	o := serverOptions{marker: testutil.Marker(t)}
	want := referenceTools(t)
	tmp, home := t.TempDir(), t.TempDir()
	if tr.name == "stdio" { // the built binary, with its sandbox; its caches under a home of its own
		o.env = []string{"TMPDIR=" + tmp, "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
		// The variables that move a cache out of the home
		// (cachelayer.Dirs), emptied: the golden lists the caches, and a
		// developer's own GOCACHE elsewhere must not change it.
		for _, k := range []string{"GOENV", "GOPATH", "GOMODCACHE", "GOCACHE", "npm_config_cache", "NPM_CONFIG_CACHE",
			"CARGO_HOME", "GRADLE_USER_HOME", "XDG_DATA_HOME", "BUN_INSTALL_CACHE_DIR"} {
			o.env = append(o.env, k+"=")
		}
	}
	cs, _ := tr.start(t, o)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.name == "stdio" {
		want = servedTools(t, servedWritable(o.env, tmp, "/tmp"))
		desc := strings.ReplaceAll(strings.ReplaceAll(want[0].Description, tmp, "<TMPDIR>"), home, "<HOME>")
		// The scrubbed names are this environment's (CI sets
		// CONCH_HOST_TESTS): the golden has none, and the sentence that
		// names them is compared below with the rest.
		if names := strings.Join(scrubbedNames(t), ", "); names != "" {
			desc = strings.Replace(desc, ". These variables of the server's environment are not passed to commands (a tool that needs one fails as if logged out): "+
				names+"; the user can pass one through with `--pass-env NAME`.", ".", 1)
		}
		testutil.Golden(t, "testdata/bash-description.golden", desc+"\n")
	}
	if len(res.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(res.Tools), len(want))
	}
	for i, w := range want {
		got := res.Tools[i]
		if got.Name != w.Name || got.Title != w.Title || got.Description != w.Description {
			t.Errorf("tool %d: %q %q %q, want %q %q %q", i, got.Name, got.Title, got.Description, w.Name, w.Title, w.Description)
		}
		for _, s := range []struct {
			name      string
			got, want any
		}{{"input", got.InputSchema, w.InputSchema}, {"output", got.OutputSchema, w.OutputSchema}} {
			var wantV any
			if err := json.Unmarshal(s.want.(json.RawMessage), &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, s.got); diff != "" {
				t.Errorf("%s %s schema (-want +got):\n%s", w.Name, s.name, diff)
			}
		}
		a := got.Annotations
		if a == nil || a.ReadOnlyHint != w.ReadOnly || a.DestructiveHint == nil || *a.DestructiveHint != w.Destructive {
			t.Errorf("%s annotations %+v, want readOnly %v destructive %v", w.Name, a, w.ReadOnly, w.Destructive)
		}
	}
}

func testForeground(t *testing.T, tr transport) {
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t)})
	r := callTool(t, cs, "bash", bash("echo hello"))
	if got := text(t, r); got != "hello\n" || r.IsError {
		t.Fatalf("echo hello: %q (isError %v)", got, r.IsError)
	}
	want := map[string]any{
		"text": "hello\n", "kind": "foreground", "exitCode": 0.0, "signal": nil, "timedOut": false, "aborted": false, "timeoutMs": 120000.0,
		"stdout": map[string]any{"truncated": false, "bytes": 6.0, "lines": 1.0},
		"stderr": map[string]any{"truncated": false, "bytes": 0.0, "lines": 0.0},
	}
	if tr.name == "stdio" {
		// conch serve runs commands under its default sandbox
		// (docs/sandbox.md); the in-process HTTP stack is built on the
		// plain local provider.
		want["sandbox"] = map[string]any{"mode": "workspace-write", "network": "public", "denied": []any{}}
	}
	if diff := cmp.Diff(want, r.StructuredContent); diff != "" {
		t.Errorf("structuredContent (-want +got):\n%s", diff)
	}

	r = callTool(t, cs, "bash", bash("echo out; echo err >&2; exit 3"))
	if got := text(t, r); got != "out\n[stderr]\nerr\n[exit code: 3]" || r.IsError {
		t.Errorf("failing command: %q (isError %v)", got, r.IsError)
	}
	r = callTool(t, cs, "bash", map[string]any{"command": "echo CONCH_SESSION_ID=$CONCH_SESSION_ID", "description": "Show the session id"})
	if got := text(t, r); !regexp.MustCompile(`^CONCH_SESSION_ID=(stdio|http-\d+)\n$`).MatchString(got) {
		t.Errorf("session id: %q", got)
	}
}

func testToolError(t *testing.T, tr transport) {
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t)})
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"description": "x"}, "Error: invalid command: expected a non-empty string"},
		{map[string]any{"command": "true"}, "Error: invalid description: expected a non-empty string"},
		{map[string]any{"command": "true", "description": "x", "timeoutMs": -5}, "Error: invalid timeoutMs: expected a positive number, got -5"},
		{map[string]any{"command": "true", "description": "x", "workdir": "/nonexistent/dir"}, "Error: workdir /nonexistent/dir: no such file or directory"},
	} {
		r := callTool(t, cs, "bash", c.args)
		if got := text(t, r); got != c.want || !r.IsError || r.StructuredContent != nil {
			t.Errorf("bash %v: %q (isError %v, structured %v), want %q", c.args, got, r.IsError, r.StructuredContent, c.want)
		}
	}
	r := callTool(t, cs, "task_output", map[string]any{"task_id": "bash-99"})
	if got := text(t, r); got != "Error: unknown task bash-99; you have no background tasks" || !r.IsError {
		t.Errorf("task_output of unknown task: %q (isError %v)", got, r.IsError)
	}
}

func testBackgroundWait(t *testing.T, tr transport) {
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t)})
	r := callTool(t, cs, "bash", bashBG("sleep 0.3; echo done"))
	if got := text(t, r); got != "started background task bash-1" {
		t.Fatalf("background start: %q", got)
	}
	if diff := cmp.Diff(map[string]any{"text": "started background task bash-1", "kind": "background", "taskId": "bash-1"}, r.StructuredContent); diff != "" {
		t.Errorf("structuredContent (-want +got):\n%s", diff)
	}
	r = callTool(t, cs, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
	if got := text(t, r); got != "done\n[status: completed, exit code: 0]" {
		t.Errorf("task_output wait: %q", got)
	}
	r = callTool(t, cs, "task_list", nil)
	if got := testutil.NoElapsed(text(t, r)); got != "bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo done" {
		t.Errorf("task_list: %q", got)
	}
}

func testTaskKill(t *testing.T, tr transport) {
	marker := testutil.Marker(t)
	cs, server := tr.start(t, serverOptions{marker: marker})
	callTool(t, cs, "bash", bashBG("sleep 100"))
	waitProcess(t, marker, server, "sleep 100")
	r := callTool(t, cs, "task_kill", map[string]any{"task_id": "bash-1"})
	if got := text(t, r); got != "killed task bash-1 [status: killed, signal: SIGTERM]" {
		t.Fatalf("task_kill: %q", got)
	}
	r = callTool(t, cs, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
	if got := text(t, r); got != "(no new output)\n[status: killed, signal: SIGTERM]" {
		t.Errorf("task_output after kill: %q", got)
	}
	waitNoProcesses(t, marker, server, 3*time.Second)
	r = callTool(t, cs, "task_kill", map[string]any{"task_id": "bash-1"})
	if got := text(t, r); got != "task bash-1 had already finished [status: killed, signal: SIGTERM]" {
		t.Errorf("second task_kill: %q", got)
	}
}

func testCancel(t *testing.T, tr transport) {
	marker := testutil.Marker(t)
	cs, server := tr.start(t, serverOptions{marker: marker})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		// A grandchild holds the pipes: only a group kill ends the call.
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 100 & sleep 200; echo never")})
		errc <- err
	}()
	waitProcess(t, marker, server, "sleep 200")
	start := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
	waitNoProcesses(t, marker, server, 3*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the group died %v after the cancel", d)
	}
	// The session goes on.
	if got := text(t, callTool(t, cs, "bash", bash("echo still here"))); got != "still here\n" {
		t.Errorf("after the cancel: %q", got)
	}
}

// ticks prints five ticks in 2.5 s by the clock, each sleeping until its
// half second since the start: a plain `sleep 0.5` five times adds up
// five forks' scheduling delays under load (2.9-3.5 s seen beside CPU
// burners). The TypeScript client's script runs the same command.
const ticks = `s=${EPOCHREALTIME/[.,]/}; for i in 1 2 3 4 5; do echo tick; d=$((s + i*500000 - ${EPOCHREALTIME/[.,]/})); ((d < 0)) && d=0; printf -v f %06d $d; sleep 0.$f; done`

func testProgress(t *testing.T, tr transport) {
	type note struct {
		at     time.Time
		params mcp.ProgressNotificationParams
	}
	var mu sync.Mutex
	var notes []note
	copts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		notes = append(notes, note{time.Now(), *req.Params})
		mu.Unlock()
	}}
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t), client: copts})
	params := &mcp.CallToolParams{Name: "bash", Arguments: bash(ticks)}
	params.SetProgressToken("progress-1")
	r, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, r); got != strings.Repeat("tick\n", 5) {
		t.Errorf("result: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) < 2 || len(notes) > 3 {
		t.Fatalf("%d progress notifications for a 2.5 s command, want 2 or 3: %+v", len(notes), notes)
	}
	msg := regexp.MustCompile(`^running for \d+\.\ds, \d+ bytes of output so far; last line: tick$`)
	for i, n := range notes {
		if n.params.ProgressToken != "progress-1" || !msg.MatchString(n.params.Message) {
			t.Errorf("notification %d: %+v", i, n.params)
		}
		if i > 0 {
			if n.params.Progress <= notes[i-1].params.Progress {
				t.Errorf("progress did not increase: %v then %v", notes[i-1].params.Progress, n.params.Progress)
			}
			// The server sends one a second; the client's receipt may
			// jitter under load.
			if gap := n.at.Sub(notes[i-1].at); gap < 600*time.Millisecond {
				t.Errorf("two notifications %v apart", gap)
			}
		}
	}
	if !strings.HasSuffix(notes[len(notes)-1].params.Message, "bytes of output so far; last line: tick") ||
		strings.HasPrefix(notes[len(notes)-1].params.Message, "running for 0") {
		t.Errorf("last message %q", notes[len(notes)-1].params.Message)
	}
}

// testProgressTTY: a tty call's progress notifications carry the last
// line its terminal shows, as a piped call's carry its last line, cut to
// tools.MaxProgressLine bytes (its end kept).
func testProgressTTY(t *testing.T, tr transport) {
	var mu sync.Mutex
	var msgs []string
	copts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, req.Params.Message)
		mu.Unlock()
	}}
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t), client: copts})
	a := bash("for i in 1 2 3; do echo tick$i; sleep 0.6; done; printf 'é%.0s' $(seq 1 120); echo; sleep 1.5")
	a["tty"] = true
	params := &mcp.CallToolParams{Name: "bash", Arguments: a}
	params.SetProgressToken("progress-tty")
	r, err := cs.CallTool(t.Context(), params)
	if err != nil || r.IsError {
		t.Fatalf("tty call: %v %+v", err, r)
	}
	mu.Lock()
	defer mu.Unlock()
	msg := regexp.MustCompile(`^running for \d+\.\ds, \d+ bytes of output so far; last line: (.*)$`)
	long := strings.Repeat("é", tools.MaxProgressLine/len("é"))
	var lines []string
	for _, m := range msgs {
		got := msg.FindStringSubmatch(m)
		if got == nil {
			t.Fatalf("progress message %q", m)
		}
		lines = append(lines, got[1])
	}
	if len(lines) < 2 || !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "tick") }) || lines[len(lines)-1] != long {
		t.Errorf("last lines %q, want a tick and then the long line's last %d bytes", lines, tools.MaxProgressLine)
	}
}

func testYield(t *testing.T, tr transport) {
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t), yieldMs: 500})
	r := callTool(t, cs, "bash", bash("for i in $(seq 1 20); do echo line$i; sleep 0.1; done"))
	got := text(t, r)
	const marker = "[still running after 500ms; moved to background task bash-1 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]"
	body, ok := strings.CutSuffix(got, marker)
	if !ok || r.IsError {
		t.Fatalf("yielded result: %q (isError %v)", got, r.IsError)
	}
	if body == "(no output)\n" {
		body = ""
	}
	// The value says what the text says, first; the streams' facts follow.
	if diff := cmp.Diff(map[string]any{"text": got, "kind": "yielded", "taskId": "bash-1", "yieldedAfterMs": 500.0, "timeoutMs": 120000.0,
		"stdout": map[string]any{"truncated": false, "bytes": float64(len(body)), "lines": float64(strings.Count(body, "\n"))},
		"stderr": map[string]any{"truncated": false, "bytes": 0.0, "lines": 0.0}}, r.StructuredContent); diff != "" {
		t.Errorf("structuredContent (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(body, "line1\n") {
		t.Errorf("output so far %q, want it to start with line1", body)
	}
	all := body
	for range 10 {
		r = callTool(t, cs, "task_output", map[string]any{"task_id": "bash-1", "wait": true})
		sc := r.StructuredContent.(map[string]any)
		read := text(t, r)
		if sc["text"] != read {
			t.Errorf("task_output value text %q, text %q", sc["text"], read)
		}
		read = read[:strings.LastIndex(read, "[status: ")]
		if read == "(no new output)\n" {
			read = ""
		}
		all += read
		if sc["status"] != "running" {
			if got := text(t, r); !strings.HasSuffix(got, "[status: completed, exit code: 0]") {
				t.Errorf("final read: %q", got)
			}
			break
		}
	}
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if all != want.String() {
		t.Errorf("yielded + task_output reads:\n%q\nwant\n%q", all, want.String())
	}
}

func testCompletionNotice(t *testing.T, tr transport) {
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t)})
	started := texts(t, callTool(t, cs, "bash", bashBG("echo x")))
	const notice = "background task bash-1 (bash: echo x) finished [status: completed, exit code: 0] after <T>. Last output:\nx\nRead all of it with task_output."
	if len(started) > 1 {
		// The task ended before its start's own result was made (a
		// loaded machine left the call waiting): that result is the
		// next one, and the notice rides on it.
		if diff := cmp.Diff([]string{"started background task bash-1", notice}, noElapsed(started)); diff != "" {
			t.Errorf("start's result with the notice (-want +got):\n%s", diff)
		}
		if got := texts(t, callTool(t, cs, "task_list", nil)); len(got) != 1 {
			t.Errorf("next call: %q", got)
		}
		return
	}
	var blocks []string
	defer func() {
		if t.Failed() { // what the wait saw last: the task's state
			t.Logf("last task_list: %q", blocks)
		}
	}()
	testutil.WaitFor(t, 5*time.Second, "a completion notice", func() bool {
		blocks = texts(t, callTool(t, cs, "task_list", nil))
		return len(blocks) > 1
	})
	if diff := cmp.Diff([]string{"bash-1 [bash] completed, exit code: 0, <T> — echo x", notice}, noElapsed(blocks)); diff != "" {
		t.Errorf("call after completion (-want +got):\n%s", diff)
	}
	// Once only.
	if got := texts(t, callTool(t, cs, "bash", bash("true"))); len(got) != 1 {
		t.Errorf("next call: %q", got)
	}
}

// cancelAfterTaskEnds starts bash-1 (sleep 0.3; echo x) and a foreground
// call, cancels the call once bash-1 has finished (its notice is pending
// by then), and waits until the call's group is gone.
func cancelAfterTaskEnds(t *testing.T, cs *mcp.ClientSession, marker string, server int) {
	t.Helper()
	callTool(t, cs, "bash", bashBG("sleep 0.3; echo x"))
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 1030")})
		errc <- err
	}()
	waitProcess(t, marker, server, "sleep 1030")
	testutil.WaitFor(t, 5*time.Second, "the background task to end", func() bool {
		for _, p := range liveProcesses(marker, server) {
			if strings.Contains(p, "sleep 0.3") {
				return false
			}
		}
		return true
	})
	time.Sleep(200 * time.Millisecond) // the task settles and its notice is pending
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v, want context.Canceled", err)
	}
	waitNoProcesses(t, marker, server, 3*time.Second)
}

// testHeldNoticeCollected: a notice held back from a cancelled call is
// dropped once the model reads the task's final output (it has the
// result: the notice would only repeat it).
func testHeldNoticeCollected(t *testing.T, tr transport) {
	marker := testutil.Marker(t)
	cs, server := tr.start(t, serverOptions{marker: marker})
	cancelAfterTaskEnds(t, cs, marker, server)
	if got := texts(t, callTool(t, cs, "task_output", map[string]any{"task_id": "bash-1"})); !cmp.Equal(got, []string{"x\n[status: completed, exit code: 0]"}) {
		t.Errorf("task_output: %q", got)
	}
	if got := texts(t, callTool(t, cs, "task_list", nil)); len(got) != 1 {
		t.Errorf("task_list: %q, want no notice", got)
	}
}

// testNoticeAfterCancel: a completion notice that became pending while a
// call ran must not ride on that call's result when the client cancelled
// it (the client drops that result): it comes with the next result.
func testNoticeAfterCancel(t *testing.T, tr transport) {
	marker := testutil.Marker(t)
	cs, server := tr.start(t, serverOptions{marker: marker})
	cancelAfterTaskEnds(t, cs, marker, server)
	const notice = "background task bash-1 (bash: sleep 0.3; echo x) finished [status: completed, exit code: 0] after <T>. Last output:\nx\nRead all of it with task_output."
	if diff := cmp.Diff([]string{"bash-1 [bash] completed, exit code: 0, <T> — sleep 0.3; echo x", notice}, noElapsed(texts(t, callTool(t, cs, "task_list", nil)))); diff != "" {
		t.Errorf("call after the cancelled one (-want +got):\n%s", diff)
	}
}

func testRootsCwd(t *testing.T, tr transport) {
	dir := filepath.Join(t.TempDir(), "x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The go-sdk client lists its roots sorted by URI: the https one,
	// which is no file root, comes after.
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t), roots: []*mcp.Root{
		{URI: "file://" + dir, Name: "x"},
		{URI: "https://example.com/not-a-file-root"},
	}})
	if got := text(t, callTool(t, cs, "bash", bash("pwd"))); got != real+"\n" {
		t.Errorf("pwd: %q, want %q", got, real+"\n")
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := bash("pwd")
	a["workdir"] = "sub"
	if got := text(t, callTool(t, cs, "bash", a)); got != filepath.Join(real, "sub")+"\n" {
		t.Errorf("pwd in relative workdir: %q", got)
	}
}

func testNoRootsCwd(t *testing.T, tr transport) {
	// The go-sdk client declares roots but has none: the server's cwd.
	cs, _ := tr.start(t, serverOptions{marker: testutil.Marker(t)})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, callTool(t, cs, "bash", bash("pwd -P"))); got != wd+"\n" {
		t.Errorf("pwd: %q, want %q", got, wd+"\n")
	}
}

// scrubbedNames are the names of this process's environment that
// commands do not get.
func scrubbedNames(t *testing.T) []string {
	ex, err := local.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	return ex.Scrubbed()
}

// TestToolsListBytes reads tools/list off the binary's stdout as bytes:
// each schema must go out exactly as the toolset wrote it (property order
// included), and the tools in the toolset's order.
func TestToolsListBytes(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "serve")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`)
	lines := bufio.NewReader(stdout)
	lines.ReadString('\n') // initialize
	list, err := lines.ReadString('\n')
	if err != nil || !strings.HasPrefix(list, `{"jsonrpc":"2.0","id":2,"result":`) {
		t.Fatalf("tools/list: %q (%v)", list, err)
	}
	at := 0
	for _, tool := range servedTools(t, nil) {
		for _, schema := range []json.RawMessage{tool.InputSchema, tool.OutputSchema} {
			i := strings.Index(list[at:], string(schema))
			if i < 0 {
				t.Fatalf("%s: schema %s not found verbatim (or out of order) in %s", tool.Name, schema, list)
			}
			at += i + len(schema)
		}
	}
}

// noElapsed is testutil.NoElapsed of each text.
func noElapsed(texts []string) []string {
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i] = testutil.NoElapsed(s)
	}
	return out
}
