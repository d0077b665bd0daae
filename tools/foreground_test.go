//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// TestForegroundGolden pins the text and the structured value of every
// foreground result shape of docs/tools.md (foreground result, structured value), from real commands.
func TestForegroundGolden(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	cases := []struct {
		name    string
		args    map[string]any
		want    string // the exact text; the golden file pins it too
		timeout bool   // the exact value depends on the run's timing
	}{
		{name: "hello", args: map[string]any{"command": "echo hello"}, want: "hello\n"},
		{name: "no_output", args: map[string]any{"command": "true"}, want: "(no output)"},
		{name: "stderr", args: map[string]any{"command": "echo out; echo err >&2"}, want: "out\n[stderr]\nerr\n"},
		{name: "stderr_after_unterminated_stdout", args: map[string]any{"command": "printf out; echo err >&2"}, want: "out\n[stderr]\nerr\n"},
		{name: "stderr_only", args: map[string]any{"command": "echo err >&2"}, want: "[stderr]\nerr\n"},
		{name: "failing", args: map[string]any{"command": "echo failing; exit 3"}, want: "failing\n[exit code: 3]"},
		{name: "failing_unterminated", args: map[string]any{"command": "printf failing; exit 3"}, want: "failing\n[exit code: 3]"},
		{name: "failing_no_output", args: map[string]any{"command": "exit 7"}, want: "(no output)\n[exit code: 7]"},
		{name: "failing_with_stderr", args: map[string]any{"command": "echo out; echo err >&2; exit 2"}, want: "out\n[stderr]\nerr\n[exit code: 2]"},
		{name: "exit_0_ending_in_marker_text", args: map[string]any{"command": "printf 'building...[exit code: 5]'"}, want: "building...[exit code: 5]"},
		{name: "self_signal", args: map[string]any{"command": "echo bye; kill -TERM $$"}, want: "bye\n[killed by signal: SIGTERM]"},
		{name: "self_sigkill", args: map[string]any{"command": "kill -KILL $$"}, want: "(no output)\n[killed by signal: SIGKILL]"},
		{name: "timeout_killed", args: map[string]any{"command": "sleep 60", "timeoutMs": 100},
			want: "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]", timeout: true},
		{name: "timeout_trapped_exit_0", args: map[string]any{"command": "trap 'exit 0' TERM; sleep 60 & wait", "timeoutMs": 1000},
			want: "(no output)\n[timed out after 1000ms]", timeout: true},
		{name: "timeout_trapped_exit_4", args: map[string]any{"command": "trap 'echo caught; exit 4' TERM; echo started; sleep 60 & wait", "timeoutMs": 1000},
			want: "started\ncaught\n[timed out after 1000ms]\n[exit code: 4]", timeout: true},
		{name: "timeout_clamped", args: map[string]any{"command": "trap 'exit 0' TERM; sleep 60 & wait", "timeoutMs": 1e9},
			want: "(no output)\n[timed out after 1500ms]", timeout: true},
		// Text with a few control bytes stays text (more than a tenth
		// would make it binary output, docs/tools.md#binary-output); the
		// BEL is removed (docs/tools.md).
		{name: "utf8_and_controls", args: map[string]any{"command": `printf 'caf\xc3\xa9 au lait \x00\x07 \xff, encore\n'`}, want: "café au lait \x00 \uFFFD, encore\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := map[string]any{"description": "Run a test command"}
			for k, v := range c.args {
				a[k] = v
			}
			ex := e
			if c.name == "timeout_clamped" {
				ex = newEnv(t, envOpts{local: local.Options{MaxTimeout: 1500 * time.Millisecond}})
			}
			r := ex.call(tools.NameBash, a)
			wantOK(t, r)
			if r.Text != c.want {
				t.Errorf("text = %q, want %q", r.Text, c.want)
			}
			golden(t, c.name+".txt", r.Text)
			v, ok := r.Value.(tools.ForegroundValue)
			if !ok || v.Kind != "foreground" {
				t.Fatalf("value = %#v, want a foreground value", r.Value)
			}
			if v.TimedOut != c.timeout || v.Aborted {
				t.Errorf("timedOut %v aborted %v, want timedOut %v", v.TimedOut, v.Aborted, c.timeout)
			}
			goldenJSON(t, c.name+".json", v)
		})
	}
}

// TestForegroundAtTheCap: output of exactly the executor's tail is whole.
func TestForegroundAtTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{local: local.Options{MaxOutputBytes: 20}})
	r := e.bash("printf '%019d\\n' 0")
	wantOK(t, r)
	if want := strings.Repeat("0", 19) + "\n"; r.Text != want {
		t.Errorf("text = %q, want %q (exactly the cap is not truncated)", r.Text, want)
	}
}

// checkSpill checks that path is a private regular file holding want.
func checkSpill(t *testing.T, path, want string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("spill file: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("spill file %s: mode %v, want a regular 0600 file", path, fi.Mode())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("spill file holds %q, want the whole stream %q", b, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestForegroundEnvironment checks the managed CONCH_* overlay: set on
// every call, fresh for each session, never from the server's environment.
// (A model's arguments cannot carry variables: see TestUnknownKeys.)
func TestForegroundEnvironment(t *testing.T) {
	t.Parallel()
	stale := append(os.Environ(), "CONCH_SESSION_ID=stale", "CONCH_SHELL=0", "CONCH_HOME=/stale", "FOO=server")
	e := newEnv(t, envOpts{local: local.Options{Environ: stale}})
	const show = `echo "$CONCH_SESSION_ID|$CONCH_SHELL|$CONCH_HOME|${FOO:-unset}"`
	a := tools.Session{ID: "session-a", Cwd: e.dir}
	b := tools.Session{ID: "session-b", Cwd: e.dir}
	for i, sess := range []tools.Session{a, b, a} {
		r := e.callAs(sess, tools.NameBash, map[string]any{"command": show, "description": "Show the managed environment"})
		if want := sess.ID + "|1|" + testHome + "|server\n"; r.Text != want {
			t.Errorf("call %d: %q, want %q", i, r.Text, want)
		}
	}
	// In the background too.
	id := e.background(b, show)
	r := e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
	if want := "session-b|1|" + testHome + "|server\n[status: completed, exit code: 0]"; r.Text != want {
		t.Errorf("background: %q, want %q", r.Text, want)
	}
}

// TestModelExtrasNeverReachTheRequest checks that the request the tools
// build holds the named arguments and the managed overlay, nothing else;
// a model's env, stdin or stdoutMaxBytes are refused (TestUnknownKeys).
func TestModelExtrasNeverReachTheRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	raw := args(t, map[string]any{"command": "echo ${FOO:-unset}", "description": "Echo a variable", "timeoutMs": 5000, "workdir": "sub"})
	b, err := tools.ParseBashArgs(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	req := e.ts.Request(e.sess, b)
	if req.Env != nil || req.Stdin != nil || req.StdoutMaxBytes != 0 {
		t.Errorf("request carries more than the arguments: %+v", req)
	}
	if req.Command != "echo ${FOO:-unset}" || req.Workdir != e.dir+"/sub" || req.Timeout != 5*time.Second {
		t.Errorf("request = %+v", req)
	}
	if want := map[string]string{"CONCH_SHELL": "1", "CONCH_SESSION_ID": "session-a", "CONCH_HOME": testHome}; !mapsEqual(req.ManagedEnv, want) {
		t.Errorf("ManagedEnv = %v, want %v", req.ManagedEnv, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestWorkdir checks docs/tools.md#workdir.
func TestWorkdir(t *testing.T) {
	t.Parallel()
	exCwd := realDir(t)
	e := newEnv(t, envOpts{local: local.Options{Cwd: exCwd}})
	for _, d := range []string{e.dir + "/sub", exCwd + "/sub", exCwd + "/other"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(e.dir+"/file", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	noCwd := tools.Session{ID: "session-a"}
	cases := []struct {
		name    string
		sess    tools.Session
		workdir any
		want    string
	}{
		{"omitted", e.sess, nil, e.dir},
		{"null", e.sess, nullValue{}, e.dir},
		{"relative", e.sess, "sub", e.dir + "/sub"},
		{"relative_dotdot", e.sess, "sub/..", e.dir},
		{"absolute", e.sess, exCwd + "/other", exCwd + "/other"},
		{"no_session_cwd", noCwd, nil, exCwd},
		{"no_session_cwd_relative", noCwd, "sub", exCwd + "/sub"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := map[string]any{"command": "pwd -P", "description": "Print the working directory"}
			if c.workdir != nil {
				a["workdir"] = c.workdir
				if _, ok := c.workdir.(nullValue); ok {
					a["workdir"] = nil
				}
			}
			r := e.callAs(c.sess, tools.NameBash, a)
			if r.Text != c.want+"\n" {
				t.Errorf("pwd = %q, want %q", r.Text, c.want+"\n")
			}
			a["run_in_background"] = true
			r = e.callAs(c.sess, tools.NameBash, a)
			wantOK(t, r)
			id := r.Value.(tools.BackgroundValue).TaskID
			r = e.callAs(c.sess, tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
			if want := c.want + "\n[status: completed, exit code: 0]"; r.Text != want {
				t.Errorf("background pwd = %q, want %q", r.Text, want)
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		for _, bg := range []bool{false, true} {
			spawned := e.dir + "/spawned"
			r := e.call(tools.NameBash, map[string]any{"command": "touch " + spawned, "description": "Touch a file", "workdir": "nope", "run_in_background": bg})
			wantError(t, r, "workdir "+e.dir+"/nope: no such file or directory")
			golden(t, "missing_bg_"+boolName(bg)+".txt", scrub(r.Text, map[string]string{e.dir: "<SESSION_CWD>"}))
			r = e.call(tools.NameBash, map[string]any{"command": "touch " + spawned, "description": "Touch a file", "workdir": "file", "run_in_background": bg})
			wantError(t, r, "workdir "+e.dir+"/file: not a directory")
			if _, err := os.Stat(spawned); err == nil {
				t.Fatal("the command ran")
			}
		}
	})
}

type nullValue struct{}

func boolName(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestForegroundAbort checks that a call cancelled while its command runs
// kills the group and ends with "tool call aborted".
func TestForegroundAbort(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	r := e.ts.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{
		"command": "sleep 60 & sleep 60; echo never", "description": "Sleep for a minute"}), nil)
	wantError(t, r, "tool call aborted")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the aborted call took %v", d)
	}
	// AssertNoProcesses (at cleanup) checks that both sleeps are gone;
	// check it now too, with the executor still open.
	testutil.AssertNoProcesses(t, e.marker)
}

// TestForegroundAbortKeepsOutput: with KeepAborted, a call cancelled
// while its command runs kills the group as before but returns what the
// command had printed and the signal that ended it; a call cancelled
// before its command started is still the error.
func TestForegroundAbortKeepsOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	up := t.TempDir() + "/up"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(up); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	keep := &tools.CallOptions{KeepAborted: true}
	r := e.ts.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{
		"command": "echo started; : > " + up + "; sleep 60 & sleep 60", "description": "Print, then sleep"}), keep)
	wantOK(t, r)
	if want := "started\n[killed by signal: SIGTERM]"; r.Text != want {
		t.Errorf("text = %q, want %q", r.Text, want)
	}
	if v, ok := r.Value.(tools.ForegroundValue); !ok || !v.Aborted || v.Signal == nil || *v.Signal != "SIGTERM" {
		t.Errorf("value = %#v, want an aborted foreground value", r.Value)
	}
	testutil.AssertNoProcesses(t, e.marker)

	r = e.ts.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{"command": "echo never", "description": "Print"}), keep)
	wantError(t, r, "tool call aborted")
}

// TestProgress checks that a long foreground call reports progress at a
// bounded rate.
func TestProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{ProgressEvery: 100 * time.Millisecond}})
	var got []tools.Progress
	start := time.Now()
	r := e.ts.Call(t.Context(), e.sess, tools.NameBash, args(t, map[string]any{
		"command": "for i in 1 2 3 4 5 6; do echo line; sleep 0.1; done", "description": "Print slowly"}),
		&tools.CallOptions{Progress: func(p tools.Progress) { got = append(got, p) }})
	took := time.Since(start)
	wantOK(t, r)
	// At most one report per 100 ms of the call's real duration (a loaded
	// machine stretches the ~600 ms loop).
	if most := int(took / (100 * time.Millisecond)); len(got) < 2 || len(got) > most {
		t.Fatalf("%d progress reports in %v at most one per 100ms: %+v", len(got), took, got)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Elapsed <= got[i-1].Elapsed || got[i].Bytes < got[i-1].Bytes {
			t.Errorf("progress goes backwards: %+v", got)
		}
		if gap := got[i].Elapsed - got[i-1].Elapsed; gap < 100*time.Millisecond {
			t.Errorf("two reports %v apart, closer than ProgressEvery: %+v", gap, got)
		}
	}
	if last := got[len(got)-1]; last.Bytes == 0 || last.Bytes > 30 {
		t.Errorf("last progress %+v: want 1..30 bytes", last)
	}
}

// TestForegroundEndedBeforeTheAbort: when a call's ctx is cancelled after
// its command has already ended (here while a slow progress report
// blocked the call), the command was not killed: the call returns its
// result rather than "tool call aborted". (Twelve rounds: select picks at
// random among ready cases.)
func TestForegroundEndedBeforeTheAbort(t *testing.T) {
	t.Parallel()
	launches := make(chan shell.Process, 1)
	e := newEnv(t, envOpts{tools: tools.Options{ProgressEvery: 10 * time.Millisecond}, launches: launches})
	for i := range 12 {
		ctx, cancel := context.WithCancel(t.Context())
		command, waitEnded := endingCommand(launches)
		r := e.ts.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{
			"command": command, "description": "Print after a short sleep"}),
			&tools.CallOptions{Progress: func(tools.Progress) {
				waitEnded() // a slow client: the command ends meanwhile
				cancel()
			}})
		cancel()
		if r.IsError || r.Text != "done\n" {
			t.Fatalf("round %d: %q (isError %v), want the ended command's result", i, r.Text, r.IsError)
		}
	}
}

// endingCommand returns a command that prints "done" after a short
// sleep, and a function that blocks until the executor has that command
// over (its process's Done): e must be made with envOpts.launches set to
// launches, a channel of one place that nothing else reads.
func endingCommand(launches chan shell.Process) (command string, waitEnded func()) {
	select {
	case <-launches: // the last round's, when its call never waited for it
	default:
	}
	var p shell.Process // the command's, once launched: a later call waits for it again
	return "sleep 0.02; echo done", func() {
		if p == nil {
			select {
			case p = <-launches:
			case <-time.After(time.Minute):
				panic("endingCommand: no command was launched")
			}
		}
		<-p.Done()
	}
}

// TestBudgetWithNotices: the completion notices that ride with a bash
// result share its budget with the text.
func TestBudgetWithNotices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{MaxResultBytes: 2000}})
	// The task ends only once its start call is back: a task that ended
	// before (the caller descheduled on a loaded machine) has its notice
	// ride on that call's own result.
	id := e.background(e.sess, "until [ -e gate ]; do sleep 0.01; done; echo done")
	if err := os.WriteFile(filepath.Join(e.dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.settle(e.sess, id)
	r := e.bash("seq 1 3000")
	if len(r.Notices) != 1 || !strings.HasPrefix(r.Notices[0].Text, "background task "+id) {
		t.Fatalf("notices = %q", r.Notices)
	}
	// The value as sent says it all, the notice after a blank line, and
	// fits the budget.
	v := r.Value.(tools.ForegroundValue)
	if v.Text != r.Text+"\n"+r.Notices[0].Text {
		t.Errorf("value text = %q, want the text, a blank line and the notice", v.Text)
	}
	if n := encoded(t, v); n > 2000 {
		t.Errorf("value of %d bytes encoded, over the budget of 2000", n)
	}
	if !strings.Contains(r.Text, " omitted; full output: ") || !strings.HasSuffix(r.Text, "2999\n3000\n") {
		t.Errorf("text = %q", r.Text)
	}
	// Without notices the text takes the whole budget.
	if alone := e.bash("seq 1 3000"); encoded(t, alone.Value) < 1900 || encoded(t, alone.Value) > 2000 || alone.Notices != nil {
		t.Errorf("value alone: %d bytes encoded, notices %q", encoded(t, alone.Value), alone.Notices)
	}
}

// encoded is the size of v as json.Marshal writes it (the MCP SDK does).
func encoded(t testing.TB, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestWorkdirHome: "~" and "~/…" in workdir are the home directory.
func TestWorkdirHome(t *testing.T) {
	t.Parallel()
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatalf("no home directory: %v", err)
	}
	real, err := filepath.EvalSymlinks(home)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{})
	for wd, want := range map[string]string{"~": real, "~/": real, "~/.": real, "~nobody": e.dir + "/~nobody"} {
		r := e.call(tools.NameBash, map[string]any{"command": "pwd -P", "description": "Print the working directory", "workdir": wd})
		if wd == "~nobody" { // not a home reference: a relative path, missing here
			wantError(t, r, "workdir "+want+": no such file or directory")
			continue
		}
		if r.Text != want+"\n" {
			t.Errorf("workdir %q: pwd = %q, want %q", wd, r.Text, want+"\n")
		}
	}
}
