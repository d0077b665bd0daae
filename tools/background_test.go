//go:build linux

package tools_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestBackgroundGolden pins the texts of docs/tools.md#background-start,
// 4 and 5 from real background commands.
func TestBackgroundGolden(t *testing.T) {
	t.Parallel()

	t.Run("completed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		r := e.call(tools.NameBash, map[string]any{"command": "echo one; sleep 0.3; echo two", "description": "Print two lines", "run_in_background": true})
		wantOK(t, r)
		golden(t, "started.txt", r.Text)
		goldenJSON(t, "started.json", r.Value)
		if r.Text != "started background task bash-1" {
			t.Fatalf("start = %q", r.Text)
		}
		// Read until the task has completed: the deltas concatenate to the
		// whole output, and the last read carries the final status line.
		var out strings.Builder
		var last tools.Result
		for deadline := time.Now().Add(10 * time.Second); ; {
			last = e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1"})
			wantOK(t, last)
			v := last.Value.(tools.TaskOutputValue)
			out.WriteString(v.Output)
			if v.Status != "running" {
				break
			}
			if !strings.HasSuffix(last.Text, "\n[status: running]") {
				t.Fatalf("running read = %q", last.Text)
			}
			if time.Now().After(deadline) {
				t.Fatal("the task never completed")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if out.String() != "one\ntwo\n" {
			t.Errorf("reads = %q, want the whole output once", out.String())
		}
		if !strings.HasSuffix(last.Text, "[status: completed, exit code: 0]") {
			t.Errorf("last read = %q", last.Text)
		}
		r = e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1"})
		golden(t, "no_new_output_completed.txt", r.Text)
		goldenJSON(t, "no_new_output_completed.json", r.Value)
	})

	t.Run("first_read_while_running", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo one; sleep 60")
		e.readUntil(e.sess, id, "one\n")
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
		golden(t, "no_new_output_running.txt", r.Text)
		if r.Text != "(no new output)\n[status: running]" {
			t.Errorf("read = %q", r.Text)
		}
	})

	t.Run("wait_finishes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "sleep 0.2; printf 'no newline'")
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true, "timeout_ms": 20000})
		golden(t, "wait_finishes.txt", r.Text)
		goldenJSON(t, "wait_finishes.json", r.Value)
		if r.Text != "no newline\n[status: completed, exit code: 0]" {
			t.Errorf("read = %q", r.Text)
		}
	})

	t.Run("wait_times_out", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo started; sleep 60")
		start := time.Now()
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true, "timeout_ms": 300})
		if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
			t.Errorf("a 300ms wait took %v", d)
		}
		golden(t, "wait_times_out.txt", r.Text)
		if r.Text != "started\n[status: running; still running after waiting 300ms]" {
			t.Errorf("read = %q", r.Text)
		}
		// The task is still alive.
		if info, err := e.rt.Get(e.sess.ID, id); err != nil || info.Status != tasks.StatusRunning {
			t.Errorf("after the wait: %+v, %v", info, err)
		}
		if r := e.call(tools.NameTaskList, "{}"); testutil.NoElapsed(r.Text) != id+" [bash] running, <T> — echo started; sleep 60" {
			t.Errorf("list = %q", r.Text)
		}
	})

	t.Run("wait_default_timeout", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{tools: tools.Options{DefaultWait: 200 * time.Millisecond, MaxWait: 400 * time.Millisecond}})
		id := e.background(e.sess, "sleep 60")
		for _, c := range []struct {
			args     map[string]any
			min, max time.Duration
			text     string
		}{
			{map[string]any{"task_id": id, "wait": true}, 200 * time.Millisecond, 3 * time.Second, "(no new output)\n[status: running; still running after waiting 200ms]"},
			{map[string]any{"task_id": id, "wait": true, "timeout_ms": 1e9}, 400 * time.Millisecond, 3 * time.Second, "(no new output)\n[status: running; still running after waiting 400ms]"},
			{map[string]any{"task_id": id, "wait": false, "timeout_ms": 1e9}, 0, 300 * time.Millisecond, "(no new output)\n[status: running]"},
		} {
			start := time.Now()
			r := e.call(tools.NameTaskOutput, c.args)
			if d := time.Since(start); d < c.min || d > c.max || r.Text != c.text {
				t.Errorf("%v: %q after %v, want a wait of %v..%v", c.args, r.Text, d, c.min, c.max)
			}
		}
	})

	t.Run("wait_aborted", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "sleep 60")
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		r := e.ts.Call(ctx, e.sess, tools.NameTaskOutput, args(t, map[string]any{"task_id": id, "wait": true}), nil)
		wantError(t, r, "wait aborted")
		if info, _ := e.rt.Get(e.sess.ID, id); info.Status != tasks.StatusRunning {
			t.Errorf("an aborted wait touched the task: %+v", info)
		}
	})

	t.Run("no_timeout_in_background", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		r := e.call(tools.NameBash, map[string]any{"command": "sleep 0.5; echo done", "description": "d", "timeoutMs": 100, "run_in_background": true})
		wantOK(t, r)
		if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "wait": true}); r.Text != "done\n[status: completed, exit code: 0]" {
			t.Errorf("read = %q", r.Text)
		}
	})

	t.Run("exit_code", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo out; echo err >&2; exit 4")
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
		golden(t, "exit_code.txt", r.Text)
		if r.Text != "out\n[stderr]\nerr\n[status: completed, exit code: 4]" {
			t.Errorf("read = %q", r.Text)
		}
	})

	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo started; sleep 60")
		e.readUntil(e.sess, id, "started\n")
		r := e.call(tools.NameTaskKill, map[string]any{"task_id": id, "reason": "no longer needed"})
		golden(t, "kill_running.txt", r.Text)
		goldenJSON(t, "kill_running.json", r.Value)
		if r.Text != "killed task bash-1 [status: killed, signal: SIGTERM]" {
			t.Errorf("kill = %q", r.Text)
		}
		r = e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
		golden(t, "killed.txt", r.Text)
		goldenJSON(t, "killed.json", r.Value)
		if r.Text != "(no new output)\n[status: killed, signal: SIGTERM]" {
			t.Errorf("read = %q", r.Text)
		}
		r = e.call(tools.NameTaskKill, map[string]any{"task_id": id})
		golden(t, "kill_killed.txt", r.Text)
		if r.Text != "task bash-1 had already finished [status: killed, signal: SIGTERM]" {
			t.Errorf("second kill = %q", r.Text)
		}
	})

	t.Run("self_signal", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo bye; kill -TERM $$")
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
		golden(t, "self_signal.txt", r.Text)
		if r.Text != "bye\n[status: killed, signal: SIGTERM]" {
			t.Errorf("read = %q", r.Text)
		}
	})

	t.Run("kill_finished", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		id := e.background(e.sess, "echo unread")
		e.settle(e.sess, id)
		r := e.call(tools.NameTaskKill, map[string]any{"task_id": id})
		golden(t, "kill_finished.txt", r.Text)
		goldenJSON(t, "kill_finished.json", r.Value)
		if r.Text != "task bash-1 had already finished [status: completed, exit code: 0]" {
			t.Errorf("kill = %q", r.Text)
		}
		// Its unread output stays readable.
		if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}); r.Text != "unread\n[status: completed, exit code: 0]" {
			t.Errorf("read after kill = %q", r.Text)
		}
	})

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		r := e.call(tools.NameTaskList, "{}")
		golden(t, "list_empty.txt", r.Text)
		goldenJSON(t, "list_empty.json", r.Value)
		if r.Text != "(no background tasks)" {
			t.Errorf("empty list = %q", r.Text)
		}
		e.background(e.sess, "sleep 60")
		done := e.background(e.sess, "echo done")
		e.settle(e.sess, done)
		failed := e.background(e.sess, "exit 9")
		e.settle(e.sess, failed)
		killed := e.background(e.sess, "sleep 61")
		e.call(tools.NameTaskKill, map[string]any{"task_id": killed})
		// A task that ignores SIGTERM stays "stopping" for the grace.
		// (task_kill would wait until it ended: the runtime's Kill
		// returns at once.)
		stopping := e.background(e.sess, "trap '' TERM; echo ready; sleep 62")
		e.readUntil(e.sess, stopping, "ready")
		if _, _, err := e.rt.Kill(e.sess.ID, stopping, "test"); err != nil {
			t.Fatal(err)
		}
		r = e.call(tools.NameTaskList, nil)
		golden(t, "list.txt", testutil.NoElapsed(r.Text))
		goldenJSON(t, "list.json", r.Value)
		// Running and stopping tasks first, then the others, each in
		// start order.
		want := "bash-1 [bash] running, <T> — sleep 60\n" +
			"bash-5 [bash] stopping, <T> — trap '' TERM; echo ready; sleep 62\n" +
			"bash-2 [bash] completed, exit code: 0, <T> — echo done\n" +
			"bash-3 [bash] completed, exit code: 9, <T> — exit 9\n" +
			"bash-4 [bash] killed, signal: SIGTERM, <T> — sleep 61"
		if testutil.NoElapsed(r.Text) != want {
			t.Errorf("list = %q, want %q", r.Text, want)
		}
		if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": stopping, "wait": true}); r.Text != "(no new output)\n[status: killed, signal: SIGKILL]" {
			t.Errorf("read of the stopped task = %q", r.Text)
		}
	})
}

// TestTaskToolErrors pins the task tools' error results.
func TestTaskToolErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for _, tool := range []string{tools.NameTaskOutput, tools.NameTaskKill} {
		for _, c := range []struct {
			args any
			msg  string
		}{
			{map[string]any{"task_id": ""}, `invalid task_id: expected a non-empty string, got ""`},
			{map[string]any{"task_id": "  "}, `invalid task_id: expected a non-empty string, got "  "`},
			{map[string]any{}, `invalid task_id: expected a non-empty string, got undefined`},
			{`not json`, `invalid task_id: expected a non-empty string, got undefined`},
			{map[string]any{"task_id": 42}, `invalid task_id: expected a non-empty string, got 42`},
			{map[string]any{"task_id": nil}, `invalid task_id: expected a non-empty string, got null`},
			{map[string]any{"task_id": "bash-99"}, `unknown task bash-99; you have no background tasks`},
		} {
			wantError(t, e.call(tool, c.args), c.msg)
		}
	}
	wantError(t, e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "wait": "yes"}), "invalid wait: expected a boolean")
	wantError(t, e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "timeout_ms": -5}), "invalid timeout_ms: expected a positive number, got -5")
	wantError(t, e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "timeout_ms": "100"}), `invalid timeout_ms: expected a positive number, got "100"`)
	wantError(t, e.call(tools.NameTaskOutput, map[string]any{"task_id": "bash-1", "wait": true, "timeout_ms": 0}), "invalid timeout_ms: expected a positive number, got 0")
	wantError(t, e.call(tools.NameTaskKill, map[string]any{"task_id": "bash-1", "reason": 3}), "invalid reason: expected a string")
	wantError(t, e.call("nope", "{}"), "unknown tool nope")

	// No runtime: the task tools are not listed, and refuse if called.
	n := newEnv(t, envOpts{noTasks: true})
	for _, tool := range []string{tools.NameTaskOutput, tools.NameTaskKill} {
		wantError(t, n.call(tool, map[string]any{"task_id": "bash-1"}), "background tasks unavailable: no task runtime is configured")
	}
	wantError(t, n.call(tools.NameTaskList, "{}"), "background tasks unavailable: no task runtime is configured")
	var names []string
	for _, tl := range n.ts.Tools() {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"bash"}, names); diff != "" {
		t.Errorf("tools without a runtime (-want +got):\n%s", diff)
	}
}

// TestNotices checks the completion notices that ride on a session's next
// call: one for a task that ended on its own, none once collected, none
// after task_kill, none for another session.
func TestNotices(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	b := tools.Session{ID: "session-b", Cwd: e.dir}

	// (The gate keeps the task from ending before its own start call
	// drains the session's notices, however loaded the machine.)
	id := e.background(e.sess, "until [ -e gate ]; do sleep 0.01; done; echo hi")
	writeGate(t, e.dir)
	e.settle(e.sess, id)
	if r := e.callAs(b, tools.NameTaskList, "{}"); r.Notices != nil {
		t.Errorf("session b got a's notice: %q", r.Notices)
	}
	r := e.bash("true")
	want := []string{"background task bash-1 (bash: until [ -e gate ]; do sleep 0.01; done; echo hi) finished [status: completed, exit code: 0] after <T>. Last output:\nhi\nRead all of it with task_output."}
	if diff := cmp.Diff(want, noticeTexts(r.Notices)); diff != "" {
		t.Errorf("notices of the next call (-want +got):\n%s", diff)
	}
	if len(r.Notices) == 1 && r.Notices[0].TaskID != id {
		t.Errorf("notice carries task id %q, want %q", r.Notices[0].TaskID, id)
	}
	golden(t, "notice.txt", strings.Join(noticeTexts(r.Notices), "\n"))
	if r := e.call(tools.NameTaskList, "{}"); r.Notices != nil {
		t.Errorf("the notice came twice: %q", r.Notices)
	}

	// Collected with task_output (here by the very call that would carry
	// the notice): no notice.
	id = e.background(e.sess, "sleep 0.2; echo collected")
	e.settle(e.sess, id)
	if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}); r.Notices != nil || r.Text != "collected\n[status: completed, exit code: 0]" {
		t.Errorf("read of a settled task = %q with notices %q", r.Text, r.Notices)
	}
	id = e.background(e.sess, "sleep 0.2; echo waited")
	if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true}); r.Notices != nil {
		t.Errorf("a wait that collected the result came with notices %q", r.Notices)
	}

	// Killed: none.
	id = e.background(e.sess, "sleep 60")
	e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	e.settle(e.sess, id)

	// A non-zero exit and a self-signal are noticed as such.
	// (A notice rides on whichever call of the session comes next, here
	// maybe the second start.)
	got := map[string]bool{}
	for _, cmd := range []string{"exit 3", "kill -TERM $$"} {
		r := e.call(tools.NameBash, map[string]any{"command": cmd, "description": "d", "run_in_background": true})
		wantOK(t, r)
		e.settle(e.sess, r.Value.(tools.BackgroundValue).TaskID)
		for _, n := range noticeTexts(r.Notices) {
			got[n] = true
		}
	}
	r = e.bash("true")
	for _, n := range noticeTexts(r.Notices) {
		got[n] = true
	}
	wantSet := map[string]bool{
		"background task bash-5 (bash: exit 3) finished [status: completed, exit code: 3] after <T>. Read all of it with task_output.":        true,
		"background task bash-6 (bash: kill -TERM $$) finished [status: killed, signal: SIGTERM] after <T>. Read all of it with task_output.": true,
	}
	if diff := cmp.Diff(wantSet, got); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if r := e.bash("true"); r.Notices != nil {
		t.Errorf("notices after the drain: %q", r.Notices)
	}
}

// TestIsolation checks that a session cannot touch another's tasks.
func TestIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	a := e.sess
	b := tools.Session{ID: "session-b", Cwd: e.dir}
	id := e.background(a, "echo secret; sleep 60")
	e.readUntil(a, id, "secret")
	e.callAs(a, tools.NameBash, map[string]any{"command": "echo more", "description": "d"}) // nothing to do with the task

	foreign := "task " + id + " belongs to another session"
	wantError(t, e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": id}), foreign)
	wantError(t, e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true, "timeout_ms": 100}), foreign)
	wantError(t, e.callAs(b, tools.NameTaskKill, map[string]any{"task_id": id}), foreign)
	if r := e.callAs(b, tools.NameTaskList, "{}"); r.Text != "(no background tasks)" {
		t.Errorf("b's list = %q", r.Text)
	}
	wantError(t, e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": "bash-99"}), "unknown task bash-99; you have no background tasks")
	wantError(t, e.callAs(a, tools.NameTaskKill, map[string]any{"task_id": "bash-99"}), "unknown task bash-99; your tasks: "+id)
	golden(t, "foreign.txt", e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": id}).Text)

	// a's task is untouched: still running, and its output still unread by b.
	if r := e.callAs(a, tools.NameTaskList, "{}"); testutil.NoElapsed(r.Text) != id+" [bash] running, <T> — echo secret; sleep 60" {
		t.Errorf("a's list = %q", r.Text)
	}
	if r := e.callAs(a, tools.NameTaskOutput, map[string]any{"task_id": id}); r.Text != "(no new output)\n[status: running]" {
		t.Errorf("a's read = %q", r.Text)
	}
}

// TestTaskLimit checks the per-session limit: the 11th running task is
// refused with nothing spawned and no number consumed; another session is
// not limited by it.
func TestTaskLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	b := tools.Session{ID: "session-b", Cwd: e.dir}
	var ids []string
	for range 10 {
		ids = append(ids, e.background(e.sess, "sleep 60"))
	}
	spawned := e.dir + "/spawned"
	r := e.call(tools.NameBash, map[string]any{"command": "touch " + spawned + "; sleep 60", "description": "One too many", "run_in_background": true})
	const limitMsg = "background task limit reached for this session (limit: 10); use task_kill to stop an unneeded task, wait for it to finish, then retry"
	wantError(t, r, limitMsg)
	golden(t, "limit.txt", r.Text)
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(spawned); err == nil {
		t.Error("the refused command ran")
	}
	// The counter was not consumed.
	if id := e.background(b, "sleep 60"); id != "bash-11" {
		t.Errorf("next id = %s, want bash-11", id)
	}
	// A finished task frees its slot.
	e.call(tools.NameTaskKill, map[string]any{"task_id": ids[0]})
	e.settle(e.sess, ids[0])
	if id := e.background(e.sess, "sleep 60"); id != "bash-12" {
		t.Errorf("id after a slot was freed = %s, want bash-12", id)
	}
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "sleep 60", "description": "d", "run_in_background": true}), limitMsg)
}

// TestStoppingTaskHoldsItsSlot: a task that ignores SIGTERM stays
// "stopping" until SIGKILL ends it after the grace, and keeps its slot
// until then.
func TestStoppingTaskHoldsItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tasks: &tasks.Options{MaxPerSession: 1}, local: local.Options{Grace: 1500 * time.Millisecond}})
	id := e.background(e.sess, "trap '' TERM; echo ready; sleep 60")
	e.readUntil(e.sess, id, "ready")
	// The runtime's Kill returns at once (task_kill would wait).
	if info, _, err := e.rt.Kill(e.sess.ID, id, "test"); err != nil || info.Status != tasks.StatusStopping {
		t.Fatalf("kill = %+v, %v", info, err)
	}
	killed := time.Now()
	const limitMsg = "background task limit reached for this session (limit: 1); use task_kill to stop an unneeded task, wait for it to finish, then retry"
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "run_in_background": true}), limitMsg)
	if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}); r.Text != "(no new output)\n[status: stopping]" {
		t.Errorf("read while stopping = %q", r.Text)
	}
	time.Sleep(500 * time.Millisecond)
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "run_in_background": true}), limitMsg)
	// task_kill of the stopping task is not a new cancellation: it waits
	// for the end the first one brings, SIGKILL after the grace.
	r := e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	if r.Text != "killed task bash-1 [status: killed, signal: SIGKILL]" {
		t.Errorf("task_kill of a stopping task = %q", r.Text)
	}
	if d := time.Since(killed); d < 1400*time.Millisecond {
		t.Errorf("the task ended %v after the kill, before the grace", d)
	}
	r = e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
	if r.Text != "(no new output)\n[status: killed, signal: SIGKILL]" {
		t.Errorf("read after the kill = %q", r.Text)
	}
	if id := e.background(e.sess, "true"); id != "bash-2" {
		t.Errorf("next id = %s, want bash-2", id)
	}
}

// TestDispose: disposing session A kills its tasks and forgets them;
// session B's keep running.
func TestDispose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	a := tools.Session{ID: e.marker + "-A", Cwd: e.dir}
	b := tools.Session{ID: e.marker + "-B", Cwd: e.dir}
	a1 := e.background(a, "sleep 60")
	a2 := e.background(a, "trap 'exit 0' TERM; echo ready; sleep 60 & wait")
	e.readUntil(a, a2, "ready")
	done := e.background(a, "true")
	e.settle(a, done)
	b1 := e.background(b, "echo b; sleep 60")
	e.readUntil(b, b1, "b\n")

	e.ts.Tasks().Dispose(a.ID)
	// A's processes (their environment carries CONCH_SESSION_ID=<a.ID>)
	// are gone once Dispose returns: it awaits them, so no polling.
	if left := testutil.Processes(a.ID); len(left) != 0 {
		t.Errorf("Dispose returned while %d of a's processes live: %+v", len(left), left)
	}
	testutil.AssertNoProcesses(t, a.ID)
	for _, id := range []string{a1, a2, done} {
		wantError(t, e.callAs(a, tools.NameTaskOutput, map[string]any{"task_id": id}), "unknown task "+id+"; you have no background tasks")
	}
	r := e.callAs(a, tools.NameTaskList, "{}")
	if r.Text != "(no background tasks)" || r.Notices != nil {
		t.Errorf("a's list after Dispose = %q, notices %q", r.Text, r.Notices)
	}
	if r := e.callAs(b, tools.NameTaskOutput, map[string]any{"task_id": b1}); r.Text != "(no new output)\n[status: running]" {
		t.Errorf("b's task after Dispose(a) = %q", r.Text)
	}
	if len(testutil.Processes(b.ID)) == 0 {
		t.Error("b's process is gone")
	}
}

// TestSpawnFailure: bash cannot be started. In the foreground and in the
// background that is an infrastructure failure known at once (a tool
// error, and no task number is used up). A provider that learns of the
// failure only later hands over a shell.FailedProcess: the task settles as
// killed before exit and its first read says why, once.
func TestSpawnFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{local: local.Options{Shell: "/nonexistent/bash"}})
	const msg = "spawn failed: fork/exec /nonexistent/bash: no such file or directory"
	wantError(t, e.bash("true"), msg)
	r := e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "run_in_background": true})
	wantError(t, r, msg)

	info, err := e.ts.Tasks().Start(e.sess.ID, tools.KindBash, "remote true", func() (tasks.Handle, error) {
		return tools.NewProcessHandle(shell.FailedProcess(errors.New("host unreachable")), tools.DefaultMaxResultBytes), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "bash-1" {
		t.Errorf("first task id %s: a failed spawn used up a number", info.ID)
	}
	e.settle(e.sess, info.ID)
	r = e.call(tools.NameTaskOutput, map[string]any{"task_id": info.ID})
	golden(t, "background.txt", r.Text)
	if want := "[stderr]\nspawn failed: host unreachable\n[status: killed, killed before exit]"; r.Text != want {
		t.Errorf("first read = %q, want %q", r.Text, want)
	}
	if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": info.ID}); r.Text != "(no new output)\n[status: killed, killed before exit]" {
		t.Errorf("second read = %q", r.Text)
	}
}

// TestKillOfAnEndedProcess: task_kill of a task whose process has already
// exited (its watcher may not have run yet) says the task had already
// finished, never "requested cancellation" of a task that then reads
// "completed"; and task_output right after the exit gives the final status.
// Real processes, many rounds: the watcher often wins the race.
func TestKillOfAnEndedProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	start := func(command string) (string, shell.Process) {
		spec, err := e.ex.Resolve(e.ts.Request(e.sess, tools.BashArgs{Command: command, Description: "d"}))
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.ex.Start(spec)
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.rt.Start(e.sess.ID, tools.KindBash, command, func() (tasks.Handle, error) { return tools.NewProcessHandle(p, tools.DefaultMaxResultBytes), nil })
		if err != nil {
			t.Fatal(err)
		}
		return info.ID, p
	}
	for i := range 30 {
		id, p := start("echo out")
		<-p.Done()
		if r := e.call(tools.NameTaskKill, map[string]any{"task_id": id}); r.Text != "task "+id+" had already finished [status: completed, exit code: 0]" {
			t.Fatalf("round %d: kill of an exited process = %q", i, r.Text)
		}
		id, p = start("echo rest; exit 2")
		<-p.Done()
		if r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}); r.Text != "rest\n[status: completed, exit code: 2]" {
			t.Fatalf("round %d: read right after the exit = %q", i, r.Text)
		}
	}
}
