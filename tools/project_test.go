//go:build linux

package tools_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// writeProject writes the project file of dir and gives it modification
// time mod (distinct times make a rewrite visible whatever the file
// system's clock granularity).
func writeProject(t *testing.T, dir, text string, mod time.Time) string {
	t.Helper()
	p := filepath.Join(dir, ".conch", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
	return p
}

func projectEnv(t *testing.T, user *rules.Rules) *env {
	t.Helper()
	return newEnv(t, envOpts{tools: tools.Options{Rules: user, Projects: config.NewProjects("", "", "")}})
}

// A project's deny rule denies a command the user's rules allow, in the
// foreground and the background, and nothing runs; a session elsewhere
// is unaffected; a rewritten file is read again.
func TestProjectDeny(t *testing.T) {
	user, err := rules.Parse(nil, nil, []string{"Bash(touch:*)"}, "allow")
	if err != nil {
		t.Fatal(err)
	}
	e := projectEnv(t, user)
	file := filepath.Join(e.dir, "ran")
	start := time.Now().Add(-time.Hour)
	writeProject(t, e.dir, "[rules]\ndeny = [\"Bash(touch:*)\"]\n", start)
	wantError(t, e.bash("touch "+file), "denied by rule Bash(touch:*): touch "+file)
	wantError(t, e.callAs(e.sess, tools.NameBash, map[string]any{"command": "true && touch " + file, "description": "Start a test task", "run_in_background": true}),
		"denied by rule Bash(touch:*): touch "+file)
	noFile(t, file)

	elsewhere := tools.Session{ID: "session-b", Cwd: realDir(t)}
	wantOK(t, e.callAs(elsewhere, tools.NameBash, map[string]any{"command": "touch " + file, "description": "Run a test command"}))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}

	writeProject(t, e.dir, "[rules]\nask = [\"Bash(git push:*)\"]\n", start.Add(time.Minute))
	wantOK(t, e.bash("touch "+file))
	wantError(t, e.bash("git push"), "not run: git push needs approval (rule Bash(git push:*)), but this client cannot ask the user; allow it in the conch configuration or run it yourself")
}

// Without rules of the user's, a project file's rules still apply.
func TestProjectDenyWithoutUserRules(t *testing.T) {
	e := projectEnv(t, nil)
	writeProject(t, e.dir, "[rules]\ndeny = [\"Bash(rm:*)\"]\n", time.Now())
	wantError(t, e.bash("echo hi; /bin/rm -f x"), "denied by rule Bash(rm:*): /bin/rm -f x")
	wantOK(t, e.bash("echo hi"))
}

// A project file that would widen the rules is refused: every bash call
// of the session fails naming the file, the line and the key, until the
// file is fixed.
func TestProjectAllowRefused(t *testing.T) {
	user, err := rules.Parse([]string{"Bash(touch:*)"}, nil, nil, "allow")
	if err != nil {
		t.Fatal(err)
	}
	e := projectEnv(t, user)
	start := time.Now().Add(-time.Hour)
	p := writeProject(t, e.dir, "[rules]\nallow = [\"Bash(touch:*)\"]\n", start)
	want := "not run: bad project configuration: config " + p + ":2: rules.allow: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)"
	wantError(t, e.bash("touch x"), want)
	wantError(t, e.bash("echo hi"), want)
	p = writeProject(t, e.dir, "timeout_ms = 1\n", start.Add(time.Minute))
	wantError(t, e.bash("echo hi"), "not run: bad project configuration: config "+p+":1: timeout_ms: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)")
	writeProject(t, e.dir, "", start.Add(2*time.Minute))
	wantOK(t, e.bash("echo hi"))
	wantError(t, e.bash("touch x"), "denied by rule Bash(touch:*): touch x")
}

// A session without a directory of its own takes the project file of
// the executor's default directory; without Options.Projects no
// project file is read.
func TestProjectDefaultDir(t *testing.T) {
	dir := realDir(t)
	writeProject(t, dir, "[rules]\ndeny = [\"Bash(echo:*)\"]\n", time.Now())
	for _, on := range []bool{true, false} {
		o := tools.Options{}
		if on {
			o.Projects = config.NewProjects("", "", "")
		}
		e := newEnv(t, envOpts{tools: o, local: local.Options{Cwd: dir}})
		e.sess.Cwd = ""
		if r := e.bash("echo hi"); on {
			wantError(t, r, "denied by rule Bash(echo:*): echo hi")
		} else {
			wantOK(t, r)
		}
	}
}

// A project's sandbox keys reach the executor with the command: an
// executor without a sandbox refuses it, and nothing runs. One that no
// sandbox could honour (Options.Sandbox.Unavailable), or that would
// widen Options.Sandbox, fails the call like a refused file, at once
// when a file is rewritten so. On another host it fails the call too.
func TestProjectSandbox(t *testing.T) {
	e := newEnv(t, envOpts{tools: tools.Options{Projects: config.NewProjects("workspace-write", "off", ""), Sandbox: tools.Sandbox{Mode: "workspace-write", Network: "off"}}})
	file := filepath.Join(e.dir, "ran")
	start := time.Now().Add(-time.Hour)
	p := writeProject(t, e.dir, "[sandbox]\nmode = \"read-only\"\n", start)
	r := e.bash("touch " + file)
	if !r.IsError || !strings.Contains(r.Text, "this executor runs commands without a sandbox, so it cannot narrow one") {
		t.Errorf("narrowed on an executor without a sandbox: %q", r.Text)
	}
	noFile(t, file)
	writeProject(t, e.dir, "[sandbox]\nnetwork = \"on\"\n", start.Add(time.Minute))
	wantError(t, e.bash("touch "+file), "not run: bad project configuration: config "+p+":2: sandbox.network: on is wider than the session's off; a project file may only narrow the sandbox")
	noFile(t, file)
	writeProject(t, e.dir, "[rules]\ndeny = []\n", start.Add(2*time.Minute))
	wantOK(t, e.bash("true"))

	none := newEnv(t, envOpts{tools: tools.Options{Projects: config.NewProjects("", "", "no init here"), Sandbox: tools.Sandbox{Unavailable: "no init here"}}})
	p = writeProject(t, none.dir, "[sandbox]\ndeny_read = [\"secrets\"]\n", start)
	wantError(t, none.bash("touch "+file), "not run: bad project configuration: config "+p+":2: sandbox.deny_read: cannot narrow the sandbox: no init here")
	noFile(t, file)

	marker := testutil.Marker(t)
	gpu, _ := pipeHost(t, "gpu1", marker, realDir(t))
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	remote := newEnv(t, envOpts{tools: tools.Options{Projects: config.NewProjects("", "", ""), Hosts: []tools.Host{gpu}}})
	p = writeProject(t, remote.dir, "[sandbox]\nnetwork = \"off\"\n", start)
	wantError(t, remote.call(tools.NameBash, map[string]any{"command": "touch " + file, "description": "Run a test command", "host": "gpu1"}),
		"not run: bad project configuration: config "+p+":2: sandbox.network: cannot narrow the sandbox: commands on host gpu1 run outside this machine's sandbox")
	noFile(t, file)
}
