//go:build linux

package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestMain makes the test binary what a conch server is (a child subreaper
// with its orphan reaper) and fails the run if a goroutine leaked.
func TestMain(m *testing.M) {
	if err := proc.BecomeSubreaper(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	testutil.VerifyTestMain(m)
}

// envOpts configure a test environment. Zero values mean: a local
// executor with a 1 s grace and a private spill directory, a task runtime
// with its defaults, and tools with their defaults plus Home.
type envOpts struct {
	local   local.Options
	tasks   *tasks.Options
	noTasks bool
	tools   tools.Options
	// launches, if set, receives every process the executor launched in
	// the foreground (the tools see a recordingExecutor).
	launches chan<- shell.Process
}

// env is one real stack: a local executor, a task runtime and the tools
// over them, plus a session whose cwd is a fresh directory.
type env struct {
	t      testing.TB
	ex     *local.Executor
	rt     *tasks.Runtime // nil with noTasks
	ts     *tools.Toolset
	marker string
	dir    string // the session's cwd: a real, absolute path
	home   string
	sess   tools.Session
}

const testHome = "/var/lib/conch-test-home"

// newEnv builds a stack whose every process carries the test's marker.
// At cleanup it closes the runtime, then the executor, then checks that
// nothing carrying the marker survived.
func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	e := &env{t: t, marker: testutil.Marker(t), home: testHome}
	lo := o.local
	if lo.Environ == nil {
		lo.Environ = os.Environ()
	}
	lo.Environ = append(lo.Environ[:len(lo.Environ):len(lo.Environ)], testutil.MarkerEnv+"="+e.marker)
	if lo.SpillParent == "" {
		lo.SpillParent = t.TempDir()
	}
	if lo.Grace == 0 {
		lo.Grace = time.Second
	}
	if lo.Cwd == "" {
		lo.Cwd = realDir(t)
	}
	ex, err := local.New(&lo)
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	e.ex = ex
	t.Cleanup(func() { testutil.AssertNoProcesses(t, e.marker) })
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("executor Close: %v", err)
		}
	})
	to := o.tools
	if !o.noTasks {
		e.rt = tasks.New(o.tasks)
		t.Cleanup(e.rt.Close)
		to.Tasks = e.rt
	}
	if to.Home == "" {
		to.Home = e.home
	}
	var tex shell.Executor = ex
	if o.launches != nil {
		tex = &recordingExecutor{Executor: ex, launches: o.launches}
	}
	e.ts = tools.New(tex, &to)
	e.dir = realDir(t)
	e.sess = tools.Session{ID: "session-a", Cwd: e.dir}
	return e
}

// recordingExecutor is a local executor that hands each process it
// launched to a test, which can then wait for the executor's own word
// that it is over (Done) rather than guess at it.
type recordingExecutor struct {
	*local.Executor
	launches chan<- shell.Process
}

func (r *recordingExecutor) Launch(s shell.Spec) (shell.Process, error) {
	p, err := r.Executor.Launch(s)
	if err == nil {
		r.launches <- p
	}
	return p, err
}

// realDir returns a fresh temporary directory by its real path.
func realDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// args marshals a map of arguments; a string or json.RawMessage is taken
// as raw JSON.
func args(t testing.TB, a any) json.RawMessage {
	t.Helper()
	switch v := a.(type) {
	case string:
		return json.RawMessage(v)
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("marshal %v: %v", a, err)
	}
	return b
}

// call calls a tool as e's session.
func (e *env) call(name string, a any) tools.Result {
	e.t.Helper()
	return e.callAs(e.sess, name, a)
}

func (e *env) callAs(sess tools.Session, name string, a any) tools.Result {
	e.t.Helper()
	return e.ts.Call(e.t.Context(), sess, name, args(e.t, a), nil)
}

// bash runs a foreground command as e's session.
func (e *env) bash(command string) tools.Result {
	e.t.Helper()
	return e.call(tools.NameBash, map[string]any{"command": command, "description": "Run a test command"})
}

// background starts command as a background task of sess and returns its id.
func (e *env) background(sess tools.Session, command string) string {
	e.t.Helper()
	r := e.callAs(sess, tools.NameBash, map[string]any{"command": command, "description": "Start a test task", "run_in_background": true})
	if r.IsError {
		e.t.Fatalf("background %q: %s", command, r.Text)
	}
	v, ok := r.Value.(tools.BackgroundValue)
	if !ok || r.Text != "started background task "+v.TaskID {
		e.t.Fatalf("background %q = %q, value %#v", command, r.Text, r.Value)
	}
	return v.TaskID
}

// settle waits, without collecting, until task id of sess has settled.
func (e *env) settle(sess tools.Session, id string) tasks.Info {
	e.t.Helper()
	info, err := e.rt.Wait(e.t.Context(), sess.ID, id, 20*time.Second)
	if err != nil || !info.Settled() {
		e.t.Fatalf("task %s did not settle: %+v, %v", id, info, err)
	}
	return info
}

// readUntil reads task id with task_output until its delta contains want,
// and returns the concatenated deltas.
func (e *env) readUntil(sess tools.Session, id, want string) string {
	e.t.Helper()
	var got strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(got.String(), want) {
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s: %q never appeared; read %q", id, want, got.String())
		}
		r := e.callAs(sess, tools.NameTaskOutput, map[string]any{"task_id": id})
		if r.IsError {
			e.t.Fatalf("task_output %s: %s", id, r.Text)
		}
		got.WriteString(r.Value.(tools.TaskOutputValue).Output)
		time.Sleep(10 * time.Millisecond)
	}
	return got.String()
}

// wantError checks that r is the tool error "Error: <msg>".
func wantError(t testing.TB, r tools.Result, msg string) {
	t.Helper()
	if !r.IsError || r.Text != "Error: "+msg || r.Value != nil {
		t.Errorf("got %q (isError %v, value %#v), want the error %q", r.Text, r.IsError, r.Value, "Error: "+msg)
	}
}

// wantOK checks that r is not an error.
func wantOK(t testing.TB, r tools.Result) {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected error result %q", r.Text)
	}
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// golden compares got with testdata/golden/<test>/<name>, byte for byte,
// or rewrites the file with -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	test := nonName.ReplaceAllString(strings.SplitN(t.Name(), "/", 2)[0], "_")
	path := filepath.Join("testdata", "golden", test, nonName.ReplaceAllString(name, "_"))
	testutil.Golden(t, path, got)
}

// goldenJSON pins v's JSON (indented) in a golden file. A task's
// elapsedMs varies from run to run: it reads "<ms>", and the run times in
// the text read "<T>" (testutil.NoElapsed).
func goldenJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	golden(t, name, testutil.NoElapsed(elapsedMs.ReplaceAllString(string(b), `"elapsedMs": "<ms>"`))+"\n")
}

var elapsedMs = regexp.MustCompile(`"elapsedMs": \d+`)

// noticeTexts returns the notices' texts with their run times replaced
// (testutil.NoElapsed).
func noticeTexts(ns []tools.Notice) []string {
	var out []string
	for _, n := range ns {
		out = append(out, testutil.NoElapsed(n.Text))
	}
	return out
}

// spillPaths matches the spill files of an executor; scrub replaces them
// (and the given directories) with placeholders for golden files.
var spillPaths = regexp.MustCompile(`/[^\s,\]]*/conch-spill[^\s,\]]*/[^\s,\]]+-(stdout|stderr)`)

func scrub(s string, dirs map[string]string) string {
	s = spillPaths.ReplaceAllString(s, "<SPILL:$1>")
	for dir, name := range dirs {
		s = strings.ReplaceAll(s, dir, name)
	}
	return s
}
