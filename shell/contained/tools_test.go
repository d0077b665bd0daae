//go:build linux

package contained_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestToolsDenied: a command the sandbox denied shows the same markers
// before its end in a background task's last read (before the status
// line) as in a foreground result (before the exit marker), and
// task_output's structured value carries the sandbox report as the
// foreground value does (docs/sandbox.md).
func TestToolsDenied(t *testing.T) {
	t.Parallel()
	ws := evalDir(t, t.TempDir())
	// Outside /tmp, which the sandbox leaves writable, and writable by the
	// server: a denial the sandbox, not the OS, caused.
	out, err := os.MkdirTemp("/var/tmp", "conch-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	out = evalDir(t, out)
	plan, err := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Network: sandbox.NetworkOn, Workspace: ws, TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) }) // after the executor's close
	ts := sandboxedTools(t, marker, ws, plan)
	sess := tools.Session{ID: "s", Cwd: ws}
	call := func(name string, args map[string]any) tools.Result {
		raw, _ := json.Marshal(args)
		r := ts.Call(t.Context(), sess, name, raw, nil)
		if r.IsError {
			t.Fatalf("%s %v: %s", name, args, r.Text)
		}
		return r
	}

	cmd := "touch " + out + "/x"
	body := "[stderr]\ntouch: cannot touch '" + out + "/x': Permission denied\n"
	mark := "[sandbox: write to " + out + "/x denied under workspace-write mode; writable: " + ws + ", /tmp]"
	want := &shell.SandboxReport{Mode: "workspace-write", Network: "on", Denied: []shell.SandboxDenial{{Path: out + "/x", Op: "write"}}}

	fg := call("bash", map[string]any{"command": cmd, "description": "Write outside"})
	if w := body + mark + "\n[exit code: 1]"; fg.Text != w {
		t.Errorf("foreground:\n%s\nwant\n%s", fg.Text, w)
	}
	if diff := cmp.Diff(want, fg.Value.(tools.ForegroundValue).Sandbox); diff != "" {
		t.Errorf("foreground sandbox value (-want +got):\n%s", diff)
	}

	bg := call("bash", map[string]any{"command": cmd, "description": "Write outside", "run_in_background": true})
	id := bg.Value.(tools.BackgroundValue).TaskID
	r := call("task_output", map[string]any{"task_id": id, "wait": true})
	if w := body + mark + "\n[status: completed, exit code: 1]"; r.Text != w {
		t.Errorf("task_output:\n%s\nwant\n%s", r.Text, w)
	}
	if diff := cmp.Diff(want, r.Value.(tools.TaskOutputValue).Sandbox); diff != "" {
		t.Errorf("task_output sandbox value (-want +got):\n%s", diff)
	}
	// The markers follow the last output once, like the output itself.
	r = call("task_output", map[string]any{"task_id": id})
	if w := "(no new output)\n[status: completed, exit code: 1]"; r.Text != w {
		t.Errorf("second task_output:\n%s\nwant\n%s", r.Text, w)
	}

	// A command that was not denied reports the sandbox with nothing denied.
	bg = call("bash", map[string]any{"command": "echo ok", "description": "Print ok", "run_in_background": true})
	r = call("task_output", map[string]any{"task_id": bg.Value.(tools.BackgroundValue).TaskID, "wait": true})
	if w := "ok\n[status: completed, exit code: 0]"; r.Text != w {
		t.Errorf("task_output of echo ok:\n%s\nwant\n%s", r.Text, w)
	}
	if diff := cmp.Diff(&shell.SandboxReport{Mode: "workspace-write", Network: "on", Denied: []shell.SandboxDenial{}}, r.Value.(tools.TaskOutputValue).Sandbox); diff != "" {
		t.Errorf("task_output sandbox value of echo ok (-want +got):\n%s", diff)
	}
}

// TestToolsDeniedTTY: a tty command the sandbox denied shows the same
// marker as a piped one, before its exit marker, and its value carries
// the sandbox report (docs/sandbox.md#the-denial-record): the record is
// the init's, whatever the command's output goes to.
func TestToolsDeniedTTY(t *testing.T) {
	t.Parallel()
	ws := evalDir(t, t.TempDir())
	out, err := os.MkdirTemp("/var/tmp", "conch-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	out = evalDir(t, out)
	plan, err := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Network: sandbox.NetworkOn, Workspace: ws, TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	ts := sandboxedTools(t, marker, ws, plan)
	raw, _ := json.Marshal(map[string]any{"command": "touch " + out + "/x", "description": "Write outside", "tty": true})
	r := ts.Call(t.Context(), tools.Session{ID: "s", Cwd: ws}, "bash", raw, nil)
	mark := "[sandbox: write to " + out + "/x denied under workspace-write mode; writable: " + ws + ", /tmp]"
	if w := "touch: cannot touch '" + out + "/x': Permission denied\n" + mark + "\n[exit code: 1]"; r.Text != w {
		t.Errorf("tty result:\n%s\nwant\n%s", r.Text, w)
	}
	want := &shell.SandboxReport{Mode: "workspace-write", Network: "on", Denied: []shell.SandboxDenial{{Path: out + "/x", Op: "write"}}}
	if v, ok := r.Value.(tools.ForegroundValue); !ok {
		t.Errorf("tty value %#v", r.Value)
	} else if diff := cmp.Diff(want, v.Sandbox); diff != "" {
		t.Errorf("tty sandbox value (-want +got):\n%s", diff)
	}

	// Moved to a task (it waits for input), the marker comes with the
	// first read after its end (task_input's, when the program ended
	// while it waited), before the status line, once.
	call := func(name string, args map[string]any) tools.Result {
		raw, _ := json.Marshal(args)
		r := ts.Call(t.Context(), tools.Session{ID: "s", Cwd: ws}, name, raw, nil)
		if r.IsError {
			t.Fatalf("%s %v: %s", name, args, r.Text)
		}
		return r
	}
	r = call("bash", map[string]any{"command": "read -p '> ' x; touch " + out + "/x", "description": "Ask, then write outside", "tty": true})
	y, ok := r.Value.(tools.YieldedValue)
	if !ok {
		t.Fatalf("tty call waiting for input: %q", r.Text)
	}
	reads := []string{call("task_input", map[string]any{"task_id": y.TaskID, "text": "go", "keys": []string{"Enter"}}).Text}
	last := call("task_output", map[string]any{"task_id": y.TaskID, "wait": true})
	reads = append(reads, last.Text, call("task_output", map[string]any{"task_id": y.TaskID}).Text)
	if all := strings.Join(reads, "\n"); strings.Count(all, mark) != 1 || !strings.Contains(all, "Permission denied\n"+mark+"\n[status: completed, exit code: 1]") {
		t.Errorf("the tty task's reads:\n%s\nwant the marker once, after the output, before the status", all)
	}
	if diff := cmp.Diff(want, last.Value.(tools.TaskOutputValue).Sandbox); diff != "" {
		t.Errorf("tty task's sandbox value (-want +got):\n%s", diff)
	}
}

// sandboxedTools are the tools with a task runtime over a contained
// executor in ws under plan (none: nil), its commands carrying marker;
// all are closed when tb ends.
func sandboxedTools(tb testing.TB, marker, ws string, plan *sandbox.Plan) *tools.Toolset {
	tb.Helper()
	initOpts := initOptions()
	initOpts.Sandbox = plan
	return toolsWith(tb, marker, ws, initOpts)
}

// toolsWith is sandboxedTools with the inits' options whole.
func toolsWith(tb testing.TB, marker, ws string, initOpts *nsinit.Options) *tools.Toolset {
	tb.Helper()
	ex, err := contained.New(&local.Options{Cwd: ws, SpillParent: tb.TempDir(), Environ: testutil.Env(marker)}, initOpts)
	if err != nil {
		tb.Fatalf("contained.New: %v", err)
	}
	tb.Cleanup(func() { ex.Close() })
	rt := tasks.New(&tasks.Options{MaxPerSession: 1000})
	tb.Cleanup(rt.Close) // runs first: stops the tasks
	return tools.New(ex, &tools.Options{Tasks: rt, Home: tb.TempDir()})
}

// evalDir is dir with its symbolic links resolved.
func evalDir(tb testing.TB, dir string) string {
	tb.Helper()
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSuffix(d, "/")
}
