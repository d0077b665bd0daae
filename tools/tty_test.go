//go:build linux

package tools_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// replCommand is a line REPL in bash: a "> " prompt (read -p prompts only
// on a terminal), each line echoed upper-cased, "quit" ends it.
const replCommand = `while IFS= read -r -p '> ' l; do [ "$l" = quit ] && break; echo "= ${l^^}"; done; echo bye`

// ttyCall runs command on a terminal in the foreground as e's session.
func (e *env) ttyCall(command string) tools.Result {
	e.t.Helper()
	return e.call(tools.NameBash, map[string]any{"command": command, "description": "Run a terminal command", "tty": true})
}

// moved checks that r is a tty call moved to a task after showing screen,
// and returns the task's id.
func moved(t *testing.T, r tools.Result, screen string) string {
	t.Helper()
	v, ok := r.Value.(tools.YieldedValue)
	want := screen + "\n[waiting for input; moved to background task " + v.TaskID +
		": send input with task_input, read it with task_output, stop it with task_kill]"
	if !ok || r.IsError || r.Text != want {
		t.Fatalf("tty call = %q (value %#v), want %q", r.Text, r.Value, want)
	}
	return v.TaskID
}

func (e *env) input(id, text string, keys ...string) tools.Result {
	e.t.Helper()
	a := map[string]any{"task_id": id, "text": text, "wait_ms": 10000}
	if keys != nil {
		a["keys"] = keys
	}
	return e.call(tools.NameTaskInput, a)
}

// TestTTYSession: a REPL through the tools, as a model drives it: the tty
// call waits at the prompt and moves to a task, task_input types a line
// and returns the answer with the status line, task_output has nothing
// more, quit ends it, and input to the finished task is refused.
func TestTTYSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	start := time.Now()
	id := moved(t, e.ttyCall(replCommand), "> ")
	if d := time.Since(start); d < tools.InputIdle {
		t.Errorf("moved after %v, before the idle period", d)
	}
	if got := e.input(id, "hello", "Enter").Text; got != "> hello\n= HELLO\n> \n[status: running]" {
		t.Errorf("input hello: %q", got)
	}
	if got := e.input(id, "two words\n").Text; got != "> two words\n= TWO WORDS\n> \n[status: running]" {
		t.Errorf("input with a newline: %q", got)
	}
	if got := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}).Text; got != "(no new output)\n[status: running]" {
		t.Errorf("task_output after input: %q", got)
	}
	if got := e.input(id, "quit", "Enter").Text; got != "> quit\nbye\n[status: completed, exit code: 0]" {
		t.Errorf("input quit: %q", got)
	}
	wantError(t, e.input(id, "more", "Enter"), "task "+id+" has already finished [status: completed, exit code: 0]")
}

// A tty call moved to a task says so with its real timeout, and the
// task's run time counts from the command's start, not from the move.
func TestTTYMovedValue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.call(tools.NameBash, map[string]any{"command": "echo ready; read line", "description": "Wait for a line", "tty": true, "timeoutMs": 60000})
	id := moved(t, r, "ready")
	v := r.Value.(tools.YieldedValue)
	if v.TimeoutMs != 60000 || v.Text != r.Text || v.YieldedAfterMs < tools.InputIdle.Milliseconds() {
		t.Errorf("value %+v, want timeoutMs 60000, the result's text, yieldedAfterMs at least %d", v, tools.InputIdle.Milliseconds())
	}
	out := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
	if ov := out.Value.(tools.TaskOutputValue); ov.ElapsedMs < v.YieldedAfterMs {
		t.Errorf("task elapsedMs %d, less than the %d ms the command ran before it moved", ov.ElapsedMs, v.YieldedAfterMs)
	}
	e.call(tools.NameTaskKill, map[string]any{"task_id": id})
}

// A tty command that ends by itself is a foreground result like any other:
// the terminal's lines, the exit marker; it ran on a terminal.
func TestTTYForeground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.ttyCall(`test -t 0 && test -t 1 && echo "on a terminal, TERM=$TERM"; printf 'progress 10%%\rprogress 100%%\n'; exit 3`)
	if want := "on a terminal, TERM=xterm-256color\nprogress 100%\n[exit code: 3]"; r.IsError || r.Text != want {
		t.Errorf("tty call = %q, want %q", r.Text, want)
	}
	v, ok := r.Value.(tools.ForegroundValue)
	if !ok || v.ExitCode == nil || *v.ExitCode != 3 {
		t.Errorf("value %#v", r.Value)
	}
	r = e.call(tools.NameBash, map[string]any{"command": "sleep 30", "description": "Sleep", "tty": true, "timeoutMs": 300})
	if want := "(no output)\n[timed out after 300ms]\n[killed by signal: SIGHUP]"; r.Text != want {
		// The kill reaches the session; which signal ends bash first is
		// the kernel's business (SIGHUP from the hang-up, or SIGTERM).
		if alt := "(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"; r.Text != alt {
			t.Errorf("timed-out tty call = %q, want %q", r.Text, alt)
		}
	}
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "x", "tty": "yes"}), "invalid tty: expected a boolean")
}

// C-c interrupts the foreground job of an interactive shell, not the
// shell; a background tty call starts a terminal task at once.
func TestTTYInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.call(tools.NameBash, map[string]any{"command": "PS1='$ ' exec bash --norc --noprofile -i", "description": "Start a shell",
		"tty": true, "run_in_background": true})
	v, ok := r.Value.(tools.BackgroundValue)
	if !ok {
		t.Fatalf("background tty call = %q", r.Text)
	}
	e.readUntil(e.sess, v.TaskID, "$ ")
	e.call(tools.NameTaskInput, map[string]any{"task_id": v.TaskID, "text": "sleep 300; echo after\n", "wait_ms": 500})
	got := e.input(v.TaskID, "", "C-c").Text
	if !strings.Contains(got, "^C") || !strings.HasSuffix(got, "$ \n[status: running]") || strings.Contains(got, "after") {
		t.Errorf("C-c: %q", got)
	}
	if got := e.input(v.TaskID, "echo still here", "Enter").Text; got != "$ echo still here\nstill here\n$ \n[status: running]" {
		t.Errorf("the shell after C-c: %q", got)
	}
	if got := e.call(tools.NameTaskKill, map[string]any{"task_id": v.TaskID}).Text; !strings.HasPrefix(got, "killed task "+v.TaskID+" [status: killed") {
		t.Errorf("kill: %q", got)
	}
}

// task_input's refusals: a task without a terminal, an unknown key (the
// list of keys pinned), bad arguments, an unknown parameter.
func TestTaskInputRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.background(e.sess, "sleep 30")
	wantError(t, e.input(id, "x"), "task "+id+" has no terminal (start it with tty: true)")
	const keys = "Enter, Tab, Escape, Backspace, Up, Down, Left, Right, Home, End, PageUp, PageDown, C-a … C-z, F1 … F12"
	if term.KeyNames != keys {
		t.Errorf("key names %q", term.KeyNames)
	}
	wantError(t, e.input(id, "x", "Enter", "Ctrl-C"), `unknown key "Ctrl-C"; keys are `+keys)
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": id, "keys": "Enter"}), "invalid keys: expected an array of key names")
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": id, "text": 3}), "invalid text: expected a string")
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": id, "wait_ms": -1}), "invalid wait_ms: expected a positive number, got -1")
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": ""}), `invalid task_id: expected a non-empty string, got ""`)
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": id, "input": "x"}), `invalid arguments: unknown parameter "input"; task_input takes task_id, text, keys, wait_ms`)
	wantError(t, e.call(tools.NameTaskInput, map[string]any{"task_id": id, "waitMs": 1}), `invalid arguments: unknown parameter "waitMs" (did you mean "wait_ms"?)`)
	wantError(t, e.input("bash-99", "x"), "unknown task bash-99; your tasks: "+id)
	e.call(tools.NameTaskKill, map[string]any{"task_id": id})
}

// Without a task runtime there is nowhere to move a terminal: tty and
// task_input are not offered.
func TestTTYNotOffered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noTasks: true})
	wantError(t, e.ttyCall("true"), `invalid arguments: unknown parameter "tty"; bash takes command, description, timeoutMs, workdir, run_in_background`)
	for _, tool := range e.ts.Tools() {
		if tool.Name == tools.NameTaskInput {
			t.Error("task_input listed without a runtime")
		}
	}
}

// The session of docs/terminal.md, with a real python3 where there is one.
func TestTTYPython(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 here")
	}
	e := newEnv(t, envOpts{})
	// The interpreter itself, not a version manager's shim, which takes
	// seconds on a loaded machine: the prompt must come within the
	// yield window.
	id := moved(t, e.ttyCall(testutil.Python3(t)+" -q"), ">>> ")
	if got := e.input(id, "6*7", "Enter").Text; got != ">>> 6*7\n42\n>>> \n[status: running]" {
		t.Errorf("6*7: %q", got)
	}
	if got := e.input(id, "", "C-d").Text; got != ">>>\n[status: completed, exit code: 0]" {
		t.Errorf("C-d: %q", got)
	}
}

// A tty call that keeps printing is moved by the yield window, with the
// same marker, and its output goes on in the task.
func TestTTYYield(t *testing.T) {
	t.Parallel()
	// The window leaves the spawn and bash's start 3 s to print the first
	// tick (500 ms was not enough at a load of 12); the ticks go on for
	// 10 s, well past it.
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 3 * time.Second}})
	// read -t is bash's own wait: a sleep process per tick made 100
	// ticks take over 10 s at a load of 20.
	r := e.ttyCall("for i in $(seq 1 200); do echo tick $i; read -t 0.05; done")
	v, ok := r.Value.(tools.YieldedValue)
	if !ok || !strings.HasPrefix(r.Text, "tick 1\n") || !strings.HasSuffix(r.Text, "\n[waiting for input; moved to background task "+v.TaskID+
		": send input with task_input, read it with task_output, stop it with task_kill]") {
		t.Fatalf("yielded tty call = %q (value %#v)", r.Text, r.Value)
	}
	e.readUntil(e.sess, v.TaskID, "tick 200\n")
	if got := e.call(tools.NameTaskKill, map[string]any{"task_id": v.TaskID}).Text; !strings.Contains(got, v.TaskID) {
		t.Errorf("kill: %q", got)
	}
}

// A tty result over the budget is cut like any result, and its cut line
// names the spill file of the raw stream: every byte the program wrote,
// escape sequences and the terminal's \r\n included. Closing the
// executor removes the file.
func TestTTYSpill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	const lines = 1000
	pad := strings.Repeat("0", 90)
	r := e.ttyCall(`x=` + pad + `; for i in $(seq 1 ` + strconv.Itoa(lines) + `); do printf '\e[31m%04d %s\e[0m\n' $i $x; done`)
	m := regexp.MustCompile(`\n\[… \d+ bytes \(\d+ lines\) omitted; full output: (/[^\]]+)\]\n`).FindStringSubmatch(r.Text)
	if r.IsError || m == nil || !strings.HasPrefix(r.Text, "0001 "+pad+"\n") || !strings.HasSuffix(r.Text, fmt.Sprintf("%04d %s\n", lines, pad)) {
		t.Fatalf("tty result over the budget: cut line %q, %d bytes", regexp.MustCompile(`\[… [^\]]*\]`).FindString(r.Text), len(r.Text))
	}
	if strings.Contains(r.Text, "\x1b") {
		t.Errorf("the result holds escape sequences")
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "\x1b[31m%04d %s\x1b[0m\r\n", i, pad)
	}
	got, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatalf("spill file: %v", err)
	}
	if string(got) != want.String() {
		t.Errorf("spill file holds %d bytes, want the %d raw bytes; starts %q", len(got), want.Len(), got[:min(len(got), 200)])
	}
	if err := e.ex.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("spill file after Close: %v", err)
	}
}

// spillCut matches the cut line of a budgeted text and captures the file
// it names.
var spillCut = regexp.MustCompile(`\n\[… \d+ bytes \(\d+ lines\) omitted; full output: (/[^\]]+)\]\n`)

// rawLines is what a program printing n numbered lines of pad wrote to its
// terminal, from line from on.
func rawLines(from, n int, pad string) string {
	var b strings.Builder
	for i := from; i <= n; i++ {
		fmt.Fprintf(&b, "%04d %s\r\n", i, pad)
	}
	return b.String()
}

// A tty call moved to a task while its raw stream is still being
// spilled names that file when its screen is over the budget, and so do
// the task's reads that are cut, while the program still runs: the file
// holds every byte written so far.
func TestTTYMovedSpill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	pad := strings.Repeat("0", 90)
	printLines := func(n int) string {
		return `for i in $(seq 1 ` + strconv.Itoa(n) + `); do printf '%04d %s\n' $i ` + pad + `; done`
	}
	r := e.ttyCall(printLines(1000) + `; read -p '> ' x; ` + printLines(1000) + `; read -p '> ' y`)
	v, ok := r.Value.(tools.YieldedValue)
	m := spillCut.FindStringSubmatch(r.Text)
	if !ok || m == nil || !strings.HasSuffix(r.Text, "> \n[waiting for input; moved to background task "+v.TaskID+
		": send input with task_input, read it with task_output, stop it with task_kill]") {
		t.Fatalf("moved tty call over the budget: cut line %q, %d bytes, ends %q", regexp.MustCompile(`\[… [^\]]*\]`).FindString(r.Text), len(r.Text), r.Text[max(0, len(r.Text)-200):])
	}
	if got, err := os.ReadFile(m[1]); err != nil || !strings.HasPrefix(string(got), rawLines(1, 1000, pad)+"> ") {
		t.Errorf("spill file named by the moved screen: %v; starts %q", err, got[:min(len(got), 200)])
	}
	got := e.input(v.TaskID, "more", "Enter").Text
	m2 := spillCut.FindStringSubmatch(got)
	if m2 == nil || m2[1] != m[1] || !strings.HasSuffix(got, "> \n[status: running]") {
		t.Fatalf("task read over the budget: cut line %q, %d bytes, ends %q", regexp.MustCompile(`\[… [^\]]*\]`).FindString(got), len(got), got[max(0, len(got)-80):])
	}
	if b, err := os.ReadFile(m[1]); err != nil || !strings.HasSuffix(string(b), rawLines(1, 1000, pad)+"> ") {
		t.Errorf("spill file named by a running task's read: %v; ends %q", err, b[max(0, len(b)-200):])
	}
}

// A tty result whose lines scrolled away before it was read says where
// they are: its first line names the raw stream's spill file, as its cut
// line does.
func TestTTYScrolledAwayNamesSpill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.ttyCall(`for i in $(seq 1 2100); do printf '%04d %034d\n' $i 0; done`)
	first := regexp.MustCompile(`^\[… \d+ lines scrolled away; full output: (/[^\]]+)\]\n`).FindStringSubmatch(r.Text)
	cut := spillCut.FindStringSubmatch(r.Text)
	if r.IsError || first == nil || cut == nil || first[1] != cut[1] {
		t.Fatalf("tty result starts %q; cut line %q", r.Text[:min(len(r.Text), 200)], regexp.MustCompile(`\n\[… [^\]]*\]`).FindString(r.Text))
	}
	if b, err := os.ReadFile(first[1]); err != nil || !strings.HasPrefix(string(b), "0001 "+strings.Repeat("0", 34)+"\r\n") {
		t.Errorf("spill file: %v", err)
	}
}

// A tty call moved to a task keeps its timeout, counted from the call's
// start, as a yielded call does: the task is killed when it passes, and
// says so. The move marker does not change.
func TestTTYTaskTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	start := time.Now()
	// The move comes after the idle period (2000 ms); the timeout leaves
	// 3000 ms of margin for it on a loaded machine.
	const timeoutMs = 5000
	id := moved(t, e.call(tools.NameBash, map[string]any{"command": "read -p '> ' x", "description": "Prompt", "tty": true, "timeoutMs": timeoutMs}), "> ")
	got := e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true, "timeout_ms": 30000}).Text
	if want := "(no new output)\n[status: killed, timed out after 5000ms, signal: SIGTERM]"; got != want {
		t.Errorf("task_output after the timeout = %q, want %q", got, want)
	}
	if d := time.Since(start); d < timeoutMs*time.Millisecond {
		t.Errorf("killed after %v, before its timeout", d)
	}
	const says = "Its timeoutMs still applies to the task: give a long one for a session meant to last."
	if schema := string(e.ts.Tools()[0].InputSchema); !strings.Contains(schema, says) {
		t.Errorf("the tty parameter does not say that its timeout applies: %s", schema)
	}
}
