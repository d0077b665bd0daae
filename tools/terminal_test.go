//go:build linux

package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestTerminalTask: a terminal is a producer of tasks like bash:
// task_output returns what the terminal shows, input goes through the
// handle, task_kill stops it (an interactive bash ignores SIGTERM, so the
// kill escalates).
func TestTerminalTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{local: local.Options{Grace: 300 * time.Millisecond}})
	spec, err := e.ex.Resolve(shell.Request{Command: "export PS1='$ ' HISTFILE=/dev/null; exec bash --norc --noprofile -i"})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := e.ex.StartTerminal(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { tm.Kill(); <-tm.Done() }()
	h := tools.NewTerminalHandle(tm, tools.DefaultMaxResultBytes)
	info, err := e.rt.Start(e.sess.ID, tools.KindBash, "bash -i", func() (tasks.Handle, error) { return h, nil })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tm.Peek(100), "$") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := e.call(tools.NameTaskOutput, map[string]any{"task_id": info.ID}).Text; got != "$ \n[status: running]" {
		t.Errorf("first read %q", got)
	}
	if err := h.Input("echo hi", []string{"Enter"}, 5*time.Second); err != nil {
		t.Errorf("input: %v", err)
	}
	// The answer the input waited for is the next read.
	if got := e.call(tools.NameTaskOutput, map[string]any{"task_id": info.ID}).Text; got != "$ echo hi\nhi\n$ \n[status: running]" {
		t.Errorf("read after input %q", got)
	}
	if got := e.call(tools.NameTaskOutput, map[string]any{"task_id": info.ID}).Text; got != "(no new output)\n[status: running]" {
		t.Errorf("second read after input %q", got)
	}
	got := e.call(tools.NameTaskKill, map[string]any{"task_id": info.ID}).Text
	if got != "killed task "+info.ID+" [status: killed, signal: SIGKILL]" {
		t.Errorf("kill: %q", got)
	}
	if err := h.Input("echo more", nil, time.Second); err == nil {
		t.Error("input to a killed terminal was accepted")
	}
}
