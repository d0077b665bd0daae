//go:build linux

package tools_test

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestElapsed pins the run time format of task lines and notices at the
// edges of each range: truncated, never rounded up into the next unit.
func TestElapsed(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0.0s"},
		{0, "0.0s"},
		{99 * time.Millisecond, "0.0s"},
		{100 * time.Millisecond, "0.1s"},
		{999 * time.Millisecond, "0.9s"},
		{4100 * time.Millisecond, "4.1s"},
		{59900 * time.Millisecond, "59.9s"},
		{59999 * time.Millisecond, "59.9s"},
		{time.Minute, "1m0s"},
		{72 * time.Second, "1m12s"},
		{time.Hour - time.Millisecond, "59m59s"},
		{time.Hour, "1h0m"},
		{2*time.Hour + 3*time.Minute + 59*time.Second, "2h3m"},
		{100 * time.Hour, "100h0m"},
	} {
		if got := tools.Elapsed(c.d); got != c.want {
			t.Errorf("Elapsed(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// TestOneLineLabel pins how a command names its task: its first line, at
// most 80 characters, "…" when cut or followed by more lines.
func TestOneLineLabel(t *testing.T) {
	long := strings.Repeat("é", 80)
	for _, c := range []struct{ in, want string }{
		{"go test ./...", "go test ./..."},
		{"  make  \n", "make"},
		{"make\n\n  \n", "make"},
		{"cd x &&\n  make", "cd x &&…"},
		{"\n\nfirst\nsecond", "first…"},
		{"a\r\nb", "a…"},
		{long, long},
		{long + "x", long + "…"},
		{strings.Repeat("x", 100), strings.Repeat("x", 80) + "…"},
		{long + "\nmore", long + "…"},
	} {
		if got := tools.OneLineLabel(c.in); got != c.want {
			t.Errorf("OneLineLabel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestTaskLine pins task_list's line from a snapshot.
func TestTaskLine(t *testing.T) {
	one := 1
	for _, c := range []struct {
		info tasks.Info
		want string
	}{
		{tasks.Info{ID: "bash-1", Kind: "bash", Label: "go test -race ./...", Status: tasks.StatusCompleted,
			Outcome: tasks.Outcome{Status: tasks.StatusCompleted, ExitCode: &one}, Elapsed: 72 * time.Second},
			"bash-1 [bash] completed, exit code: 1, 1m12s — go test -race ./..."},
		{tasks.Info{ID: "bash-2", Kind: "bash", Label: "sleep 60", Status: tasks.StatusRunning,
			Outcome: tasks.Outcome{Status: tasks.StatusRunning}, Elapsed: 4100 * time.Millisecond},
			"bash-2 [bash] running, 4.1s — sleep 60"},
		{tasks.Info{ID: "bash-3", Kind: "bash", Label: "make\ntest", Status: tasks.StatusKilled,
			Outcome: tasks.Outcome{Status: tasks.StatusKilled, Signal: "SIGTERM", TimedOut: true, Timeout: 800 * time.Millisecond}, Elapsed: 2*time.Hour + 3*time.Minute},
			"bash-3 [bash] killed, timed out after 800ms, signal: SIGTERM, 2h3m — make…"},
	} {
		if got := tools.TaskLine(c.info); got != c.want {
			t.Errorf("TaskLine = %q, want %q", got, c.want)
		}
	}
}

// TestTaskKillWaits: task_kill answers once the task has really ended:
// at once for a command that stops on SIGTERM, after the grace for one
// that ignores it; and says the task is still stopping when it has not
// ended within the grace plus a second.
func TestTaskKillWaits(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	e := newEnv(t, envOpts{local: local.Options{Grace: grace}})

	id := e.background(e.sess, "echo ready; sleep 60")
	e.readUntil(e.sess, id, "ready")
	r := e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	golden(t, "killed.txt", r.Text)
	if r.Text != "killed task "+id+" [status: killed, signal: SIGTERM]" {
		t.Errorf("kill = %q", r.Text)
	}
	if v := r.Value.(tools.TaskKillValue); v.Status != "killed" || v.Signal != "SIGTERM" || v.AlreadyFinished {
		t.Errorf("value = %+v", v)
	}
	if left := testutil.Processes(e.marker); len(left) != 0 {
		t.Errorf("task_kill returned while the task's processes live: %+v", left)
	}

	id = e.background(e.sess, "trap '' TERM; echo ready; sleep 60")
	e.readUntil(e.sess, id, "ready")
	start := time.Now()
	r = e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	if r.Text != "killed task "+id+" [status: killed, signal: SIGKILL]" {
		t.Errorf("kill of a TERM-ignoring task = %q", r.Text)
	}
	if d := time.Since(start); d < grace {
		t.Errorf("answered after %v, before the grace", d)
	}

	// A producer that does not stop when asked: its task stays stopping.
	spec, err := e.ex.Resolve(e.ts.Request(e.sess, tools.BashArgs{Command: "sleep 60", Description: "d"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.ex.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() }) // before the runtime's Close waits for it
	info, err := e.rt.Start(e.sess.ID, tools.KindBash, "sleep 60", func() (tasks.Handle, error) {
		return deafHandle{tools.NewProcessHandle(p, tools.DefaultMaxResultBytes)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	r = e.call(tools.NameTaskKill, map[string]any{"task_id": info.ID})
	golden(t, "still_stopping.txt", r.Text)
	if r.Text != "requested cancellation of task "+info.ID+"; it is still stopping" {
		t.Errorf("kill of a task that does not stop = %q", r.Text)
	}
	if d := time.Since(start); d < grace+time.Second || d > grace+time.Second+5*time.Second {
		t.Errorf("answered after %v, want the grace plus a second", d)
	}
}

// deafHandle is a task whose work ignores cancellation.
type deafHandle struct{ *tools.ProcessHandle }

func (deafHandle) Cancel(string) {}

// TestWaitProgress: a task_output wait reports progress (the task's run
// time and output so far) while it waits, and a wait that runs out says
// so in its status line.
func TestWaitProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{ProgressEvery: 100 * time.Millisecond}})
	id := e.background(e.sess, "echo 12345; sleep 60")
	e.readUntil(e.sess, id, "12345")
	var mu sync.Mutex
	var got []tools.Progress
	r := e.ts.Call(t.Context(), e.sess, tools.NameTaskOutput, args(t, map[string]any{"task_id": id, "wait": true, "timeout_ms": 550}),
		&tools.CallOptions{Progress: func(p tools.Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}})
	golden(t, "waited_out.txt", r.Text)
	if r.Text != "(no new output)\n[status: running; still running after waiting 550ms]" {
		t.Errorf("text = %q", r.Text)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 || len(got) > 6 {
		t.Fatalf("%d progress reports in a 550ms wait every 100ms: %+v", len(got), got)
	}
	for i, p := range got {
		if p.Bytes != 6 || i > 0 && p.Elapsed <= got[i-1].Elapsed {
			t.Errorf("report %d = %+v (after %+v)", i, p, got[max(i-1, 0)])
		}
	}
}

// TestNoticeLastOutput: a notice shows the last lines of the output the
// model has not read, and reading them later still returns all of it.
func TestNoticeLastOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	// Unread: 20 short lines, a 601-byte line, "tail", and on stderr
	// "oops". The notice shows at most 500 bytes of each stream's end,
	// from a line start: the long line does not fit.
	const command = "echo seen; sleep 0.5; seq 1 20; printf '%600s\\n' x | tr ' ' y; echo tail; echo oops >&2; exit 2"
	id := e.background(e.sess, command)
	e.readUntil(e.sess, id, "seen")
	e.settle(e.sess, id)
	r := e.bash("true")
	want := []string{"background task " + id + " (bash: " + command[:80] + "…) " +
		"finished [status: completed, exit code: 2] after <T>. Last output:\ntail\n[stderr]\noops\nRead all of it with task_output."}
	if diff := cmp.Diff(want, noticeTexts(r.Notices)); diff != "" {
		t.Fatalf("notice (-want +got):\n%s", diff)
	}
	golden(t, "notice.txt", noticeTexts(r.Notices)[0])
	out := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}).Value.(tools.TaskOutputValue).Output
	if !strings.HasPrefix(out, "1\n2\n") || !strings.HasSuffix(out, "tail\n[stderr]\noops\n") {
		t.Errorf("read after the notice = %q", out)
	}
}

// FuzzOneLineLabel: a label is one line of at most 80 characters plus
// "…", valid UTF-8 when the command is.
func FuzzOneLineLabel(f *testing.F) {
	f.Add("go test ./...")
	f.Add("a\nb")
	f.Add(strings.Repeat("é", 100))
	f.Fuzz(func(t *testing.T, command string) {
		got := tools.OneLineLabel(command)
		if strings.Contains(got, "\n") || utf8.RuneCountInString(got) > 81 || utf8.ValidString(command) && !utf8.ValidString(got) {
			t.Fatalf("OneLineLabel(%q) = %q", command, got)
		}
	})
}

// TestTaskListAgreesWithNotices: a task_list result never shows a task
// running while a notice riding on the same result says it finished. A
// task that ends while the list is drawn must not be listed as running
// and announced as finished at once; the race is hit by listing right
// after starting tasks that end at once, many times.
func TestTaskListAgreesWithNotices(t *testing.T) {
	// Tasks that end at once may still run when the next starts.
	e := newEnv(t, envOpts{tasks: &tasks.Options{MaxPerSession: 200}})
	for i := range 150 {
		r := e.call(tools.NameBash, map[string]any{"command": "true", "description": "End at once", "run_in_background": true})
		if r.IsError {
			t.Fatalf("start %d: %s", i, r.Text)
		}
		for range 3 {
			r = e.call(tools.NameTaskList, map[string]any{})
			for _, n := range r.Notices {
				for line := range strings.Lines(r.Text) {
					if strings.HasPrefix(line, n.TaskID+" [bash] running") {
						t.Fatalf("task_list says %q and its notice says %q", strings.TrimSpace(line), n.Text)
					}
				}
			}
		}
	}
}
