//go:build linux

package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestYield: a foreground call still running after the yield window moves
// into a background task without losing or repeating a byte.
func TestYield(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 300 * time.Millisecond}})
	start := time.Now()
	r := e.call(tools.NameBash, map[string]any{
		"command":     "for i in $(seq 1 15); do echo line-$i; sleep 0.1; done",
		"description": "Print fifteen numbered lines slowly",
	})
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("the call returned after %v, want about 300ms", d)
	}
	wantOK(t, r)
	const marker = "[still running after 300ms; moved to background task bash-1 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]"
	if !strings.HasSuffix(r.Text, "\n"+marker) {
		t.Fatalf("yielded text = %q", r.Text)
	}
	v, ok := r.Value.(tools.YieldedValue)
	if !ok || v.Kind != "yielded" || v.TaskID != "bash-1" || v.YieldedAfterMs != 300 || v.TimeoutMs != 120000 {
		t.Errorf("value = %#v", r.Value)
	}
	// The value's text is the result's; its streams' facts count the
	// output so far. On a loaded machine bash may not have printed its
	// first line within the 300 ms: then there is none so far.
	so, shown := v.Stdout.Text, v.Stdout.Text
	if so == "" {
		shown = "(no output)\n"
	}
	if r.Text != shown+marker || v.Text != r.Text || v.Stderr.Text != "" || v.Stdout.Truncated ||
		v.Stdout.Bytes != int64(len(so)) || v.Stdout.Lines != int64(strings.Count(so, "\n")) {
		t.Errorf("value streams %+v, text %q", v, r.Text)
	}
	v.Text, v.Stdout.Bytes, v.Stdout.Lines = "<lines so far>\n"+marker, 0, 0
	goldenJSON(t, "yielded.json", v)
	// The lines so far vary with timing; the shape does not.
	golden(t, "yielded_marker.txt", marker)
	if v, ok := tools.PresentResult(tools.NameBash, args(t, map[string]any{"command": "x", "description": "d"}), []string{r.Text}, false); !ok || v.Terminal() {
		t.Errorf("a yielded result presented as %+v", v)
	}

	got := strings.TrimSuffix(strings.TrimSuffix(r.Text, marker), "\n")
	if got == "(no output)" {
		got = ""
	} else {
		got += "\n"
	}
	list := e.call(tools.NameTaskList, "{}")
	if testutil.NoElapsed(list.Text) != "bash-1 [bash] running, <T> — for i in $(seq 1 15); do echo line-$i; sleep 0.1; done" {
		t.Errorf("list = %q", list.Text)
	}
	out := e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "wait": true})
	if !strings.HasSuffix(out.Text, "\n[status: completed, exit code: 0]") {
		t.Fatalf("task_output = %q", out.Text)
	}
	ov := out.Value.(tools.TaskOutputValue)
	got += ov.Output
	// Its run time counts from the command's start, not from the yield:
	// fifteen lines 0.1 s apart.
	if ov.ElapsedMs < 1400 {
		t.Errorf("elapsedMs = %d, want the whole run of at least 1400", ov.ElapsedMs)
	}
	var want strings.Builder
	for i := 1; i <= 15; i++ {
		want.WriteString("line-" + itoa(i) + "\n")
	}
	if got != want.String() {
		t.Errorf("yielded text + task_output = %q, want every line exactly once: %q", got, want.String())
	}
	if out.Notices != nil {
		t.Errorf("notices for a task whose result was collected: %q", out.Notices)
	}
}

// TestYieldKeepsTheTimeout: a yielded command's own timeout still applies
// to it as a task.
func TestYieldKeepsTheTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 100 * time.Millisecond}})
	r := e.call(tools.NameBash, map[string]any{"command": "sleep 60", "description": "Sleep", "timeoutMs": 800})
	want := "(no output)\n[still running after 100ms; moved to background task bash-1 (its 800ms timeout still applies): read it with task_output, stop it with task_kill]"
	if r.Text != want {
		t.Fatalf("text = %q, want %q", r.Text, want)
	}
	info := e.settle(e.sess, "bash-1")
	if diff := cmp.Diff(tasks.Outcome{Status: tasks.StatusKilled, Signal: "SIGTERM", TimedOut: true, Timeout: 800 * time.Millisecond}, info.Outcome); diff != "" {
		t.Errorf("outcome (-want +got):\n%s", diff)
	}
	if d := time.Since(info.Started); d > 5*time.Second {
		t.Errorf("the task ended %v after it started", d)
	}
	// It ended on its own (its timeout), so its owner is told.
	r = e.call(tools.NameTaskList, "{}")
	const line = "bash-1 [bash] killed, timed out after 800ms, signal: SIGTERM, <T> — sleep 60"
	if testutil.NoElapsed(r.Text) != line {
		t.Errorf("list = %q, want %q", r.Text, line)
	}
	wantNotices := []string{"background task bash-1 (bash: sleep 60) finished [status: killed, timed out after 800ms, signal: SIGTERM] after <T>. Read all of it with task_output."}
	if diff := cmp.Diff(wantNotices, noticeTexts(r.Notices)); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	// Its output ends as a foreground result's would, once, and so does
	// its status line.
	r = e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1"})
	if want := "[timed out after 800ms]\n[status: killed, timed out after 800ms, signal: SIGTERM]"; r.Text != want {
		t.Errorf("task_output = %q, want %q", r.Text, want)
	}
	v := r.Value.(tools.TaskOutputValue)
	if !v.TimedOut || v.TimeoutMs != 800 || v.Signal != "SIGTERM" || v.ExitCode != nil {
		t.Errorf("value = %+v", v)
	}
	r = e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1"})
	if !strings.HasPrefix(r.Text, "(no new output)\n[status: killed") {
		t.Errorf("next read = %q", r.Text)
	}
}

// TestYieldAtTheLimit: a session at its task limit cannot take one more
// task, so the call stays in the foreground.
func TestYieldAtTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tasks: &tasks.Options{MaxPerSession: 1}, tools: tools.Options{YieldAfter: 100 * time.Millisecond}})
	e.background(e.sess, "sleep 60")
	r := e.call(tools.NameBash, map[string]any{"command": "sleep 0.4; echo done", "description": "Sleep a little"})
	if r.Text != "done\n" {
		t.Errorf("text = %q, want the foreground result", r.Text)
	}
	if _, ok := r.Value.(tools.ForegroundValue); !ok {
		t.Errorf("value = %#v", r.Value)
	}
	// A fast command is not yielded at all (the window is long: bash's
	// start alone can take hundreds of milliseconds on a loaded machine).
	e2 := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 3 * time.Second}})
	if r := e2.bash("echo fast"); r.Text != "fast\n" {
		t.Errorf("fast = %q", r.Text)
	}
	if r := e2.call(tools.NameTaskList, "{}"); r.Text != "(no background tasks)" {
		t.Errorf("list = %q", r.Text)
	}
}

// TestYieldNeverMovesAnEndedCommand: a transport's progress report can
// block (a slow client); when it returns, the command may have ended and
// the yield window passed at once. The call then returns the command's
// result: a command that has exited is not "still running", and no task is
// made of it. (select chooses at random among ready cases, so one round
// would pass half the time; twelve rounds almost never.)
func TestYieldNeverMovesAnEndedCommand(t *testing.T) {
	t.Parallel()
	launches := make(chan shell.Process, 1)
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 50 * time.Millisecond, ProgressEvery: 10 * time.Millisecond}, launches: launches})
	for i := range 12 {
		command, waitEnded := endingCommand(launches)
		r := e.ts.Call(t.Context(), e.sess, tools.NameBash, args(t, map[string]any{
			"command": command, "description": "Print after a short sleep"}),
			&tools.CallOptions{Progress: func(tools.Progress) { waitEnded() }})
		if r.Text != "done\n" {
			t.Fatalf("round %d: %q, want the ended command's own result", i, r.Text)
		}
		if _, ok := r.Value.(tools.ForegroundValue); !ok {
			t.Fatalf("round %d: value %#v", i, r.Value)
		}
	}
	if r := e.call(tools.NameTaskList, "{}"); r.Text != "(no background tasks)" || r.Notices != nil {
		t.Errorf("list = %q, notices %q: an ended command became a task", r.Text, r.Notices)
	}
}

// TestNoYieldWithoutBackground: a deployment that disabled background
// execution gets none through the yield either; the call stays in the
// foreground until it ends.
func TestNoYieldWithoutBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 100 * time.Millisecond, DisableBackground: true}})
	r := e.call(tools.NameBash, map[string]any{"command": "sleep 0.4; echo done", "description": "Sleep a little"})
	if r.Text != "done\n" {
		t.Errorf("text = %q, want the foreground result", r.Text)
	}
	if r := e.call(tools.NameTaskList, "{}"); r.Text != "(no background tasks)" {
		t.Errorf("list = %q", r.Text)
	}
}

// TestYieldBudget: a yielded result is held to the budget like any other,
// and its value carries the same texts.
func TestYieldBudget(t *testing.T) {
	t.Parallel()
	// The window lets seq print all its lines first on a loaded machine.
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 1500 * time.Millisecond, MaxResultBytes: 5000}})
	r := e.call(tools.NameBash, map[string]any{"command": "seq 1 8000; sleep 60", "description": "Print and sleep"})
	v, ok := r.Value.(tools.YieldedValue)
	if !ok || len(r.Text) > 5000 {
		t.Fatalf("yielded %d bytes over a budget of 5000, value %#v", len(r.Text), r.Value)
	}
	if !strings.HasPrefix(r.Text, "1\n2\n3\n") || !strings.Contains(r.Text, " omitted; full output: (unavailable: not saved to a file)]\n") ||
		!strings.HasSuffix(r.Text, "7999\n8000\n[still running after 1500ms; moved to background task bash-1 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]") {
		t.Errorf("yielded text = %q", r.Text)
	}
	if !v.Stdout.Truncated || !strings.HasPrefix(r.Text, v.Stdout.Text) {
		t.Errorf("value %+v does not carry the text's stdout", v.Stdout)
	}
}
