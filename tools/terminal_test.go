//go:build linux

package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// rawless is a bare term.Term as a shell.Terminal: its raw stream is not
// captured.
type rawless struct{ *term.Term }

func (rawless) Raw() shell.Output { return shell.Output{} }

// TestTerminalTask: a terminal is a producer of tasks like bash:
// task_output returns what the terminal shows, input goes through the
// handle, task_kill stops it (an interactive bash ignores SIGTERM, so the
// kill escalates).
func TestTerminalTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tm, err := term.Start([]string{"bash", "--norc", "--noprofile", "-i"}, &term.Options{
		Env:   append(testutil.Env(e.marker), "PS1=$ ", "HISTFILE=/dev/null"),
		Grace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	h := tools.NewTerminalHandle(rawless{tm}, tools.DefaultMaxResultBytes)
	info, err := e.rt.Start(e.sess.ID, tools.KindBash, "bash -i", func() (tasks.Handle, error) { return h, nil })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(tm.Screen(), "$") && time.Now().Before(deadline) {
		tm.WaitQuiet(100 * time.Millisecond)
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
