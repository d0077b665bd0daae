//go:build linux

package tools_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// TestTaskLeftovers: a background task whose command exited at once but
// left a fork-and-exit loop (ignoring SIGTERM) and a sleep says so in its
// notice, its task_output status line and its task_list line; task_kill
// ends them and says what it killed; a task that left nothing is "had
// already finished" as before (docs/tasks.md#task_kill).
func TestTaskLeftovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	loop, beat := testutil.ForkLoop(t)
	// The task starts its work only once its start call is back: a task
	// that ended before (the caller descheduled on a loaded machine) has
	// its notice ride on that call's own result (once in CI).
	id := e.background(e.sess, "until [ -e gate ]; do sleep 0.01; done; sleep 1061 >/dev/null 2>&1 & "+loop+" >/dev/null 2>&1 & echo started")
	writeGate(t, e.dir)
	e.settle(e.sess, id)
	testutil.WaitBeating(t, beat)
	testutil.WaitFor(t, 10*time.Second, "the sleep", func() bool { return len(testutil.Processes(e.marker)) >= 2 })

	// The notice rides on the next call; its count is at least the sleep
	// and the loop (proc.LoopCount: a loop no scan sees alive still
	// counts by the zombies it leaves).
	r := e.call(tools.NameTaskList, map[string]any{})
	if len(r.Notices) != 1 {
		t.Fatalf("notices %q, want one", r.Notices)
	}
	// The loop counts as one or two, depending on what a scan catches.
	n := leftoverCount.FindStringSubmatch(r.Notices[0].Text)
	if n == nil {
		t.Fatalf("notice %q: no count", r.Notices[0].Text)
	}
	if c, _ := strconv.Atoi(n[1]); c < 2 {
		t.Fatalf("notice %q: no count of 2 or more processes", r.Notices[0].Text)
	}
	golden(t, "notice", anyCount.ReplaceAllString(testutil.NoElapsed(r.Notices[0].Text), "<N> processes"))
	golden(t, "task_list", anyCount.ReplaceAllString(testutil.NoElapsed(r.Text), "<N> processes"))
	out := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
	golden(t, "task_output", anyCount.ReplaceAllString(out.Text, "<N> processes"))
	if v := out.Value.(tools.TaskOutputValue); v.LeftRunning < 2 {
		t.Errorf("task_output value %+v: leftRunning below 2", v)
	}

	k := e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	wantOK(t, k)
	if !killedLeftovers.MatchString(k.Text) {
		t.Errorf("task_kill: %q", k.Text)
	}
	golden(t, "task_kill", anyCount.ReplaceAllString(k.Text, "<N> processes"))
	if testutil.Beating(t, beat) {
		t.Error("the fork loop runs after task_kill")
	}
	testutil.WaitFor(t, 5*time.Second, "the sleep to end", func() bool { return len(testutil.Processes(e.marker)) == 0 })
	k = e.call(tools.NameTaskKill, map[string]any{"task_id": id})
	if want := "task " + id + " had already finished [status: completed, exit code: 0]"; k.Text != want {
		t.Errorf("second task_kill: %q, want %q", k.Text, want)
	}
	if l := e.call(tools.NameTaskList, map[string]any{}); strings.Contains(l.Text, "still running") {
		t.Errorf("task_list after the kill: %q", l.Text)
	}
}

var (
	leftoverCount   = regexp.MustCompile(`; (\d+) processes it started are still running\]`)
	killedLeftovers = regexp.MustCompile(`\(\d+ processes\)`)
	anyCount        = regexp.MustCompile(`\b\d+ processes`)
)
