//go:build linux

package egress_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// containedExec is the contained provider with a workspace-write
// sandbox whose network is pol.
func containedExec(t *testing.T, pol netpolicy.Policy) *local.Executor {
	t.Helper()
	marker := guard(t)
	dir := t.TempDir()
	plan, err := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Network: sandbox.Network(pol.Mode), Net: pol, Workspace: dir,
		TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := contained.New(&local.Options{Cwd: dir, Environ: append(os.Environ(), marker)}, &nsinit.Options{
		Env: []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr, Sandbox: plan})
	if err != nil {
		t.Fatalf("contained.New: %v", err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// TestContainedMarkers: a refused connection is named in the result of
// the command that made it, also when the command exits 0, and listed in
// its structured sandbox value.
func TestContainedMarkers(t *testing.T) {
	ex := containedExec(t, netpolicy.Policy{Mode: netpolicy.Public, Deny: []string{"*.denied.test"}})
	name := uniqueName(t, "m")
	netlab.SetHost(t, name+".denied.test", netlab.Public[0])
	spec, err := ex.Resolve(shell.Request{Command: curl(name+".denied.test", netlab.HTTPPort) + "; " + curl("169.254.169.254", 80) + "; echo done", Owner: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := shell.Run(context.Background(), ex, spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout.Text != "done\n" {
		t.Fatalf("exit %v, stdout %q, stderr %q", res.ExitCode, res.Stdout.Text, res.Stderr.Text)
	}
	want := []string{
		"[sandbox: network access to " + name + ".denied.test:80 denied (denied by *.denied.test)]",
		"[sandbox: network access to 169.254.169.254:80 denied (the cloud metadata address)]",
	}
	if !slices.Equal(res.Notes, want) {
		t.Errorf("notes %q, want %q", res.Notes, want)
	}
	b, _ := json.Marshal(res.Sandbox)
	if got, want := string(b), `{"mode":"workspace-write","network":"public","denied":[{"host":"`+name+`.denied.test","port":80,"op":"connect","reason":"denied by *.denied.test"},{"host":"169.254.169.254","port":80,"op":"connect","reason":"the cloud metadata address"}]}`; got != want {
		t.Errorf("sandbox value %s, want %s", got, want)
	}
	// The next command of the session names nothing of the first's.
	spec, _ = ex.Resolve(shell.Request{Command: "true", Owner: "s1"})
	if res, _ := shell.Run(context.Background(), ex, spec); len(res.Notes) != 0 {
		t.Errorf("the next command got %q", res.Notes)
	}
}

// approver answers the tools' questions from a script and records them.
type approver struct {
	answer tools.Answer
	asked  []string
}

func (a *approver) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	a.asked = append(a.asked, q.Message()+"\n"+strings.Join(q.Choices(), " | "))
	return a.answer, nil
}

// TestToolsQuestion: the bash tool lends its call's way of asking to the
// executor, and the question reads as docs/sandbox.md#network says; a
// call that cannot ask is refused with the marker.
func TestToolsQuestion(t *testing.T) {
	ex := containedExec(t, netpolicy.Policy{Mode: netpolicy.Allowlist})
	netlab.SetHost(t, "ask.example.test", netlab.Public[1])
	ts := tools.New(ex, nil)
	call := func(ap tools.Approver) string {
		r := ts.Call(context.Background(), tools.Session{ID: "q1"}, "bash",
			json.RawMessage(`{"command":"`+curl("ask.example.test", netlab.HTTPPort)+`","description":"fetch"}`), &tools.CallOptions{Approver: ap})
		return r.Text
	}
	got := call(nil)
	if want := "[sandbox: network access to ask.example.test:80 denied (not in the allowlist)]"; !strings.Contains(got, want) {
		t.Errorf("no way to ask: %q, want the marker %q", got, want)
	}
	a := &approver{answer: tools.AllowSession}
	if got := call(a); !strings.HasPrefix(got, "hello from 203.0.113.11") {
		t.Errorf("allowed: %q", got)
	}
	if got := call(a); !strings.HasPrefix(got, "hello from 203.0.113.11") {
		t.Errorf("allowed again: %q", got)
	}
	want := []string{"Allow network access to ask.example.test for this session?\nAllow ask.example.test for this session | Allow ask.example.test:80 once | Deny"}
	if !slices.Equal(a.asked, want) {
		t.Errorf("asked %q, want %q", a.asked, want)
	}
	testutil.Golden(t, "testdata/question.golden", strings.Join(a.asked, "\n")+"\n")
}

// TestProjectNarrowsToAllowlist: a project file narrows the session's
// public network to an allowlist of its own; a project file that would
// widen it fails the session's calls.
func TestProjectNarrowsToAllowlist(t *testing.T) {
	ex := containedExec(t, netpolicy.Policy{Mode: netpolicy.Public})
	netlab.SetHost(t, "listed.example.test", netlab.Public[0])
	netlab.SetHost(t, "other.example.test", netlab.Public[1])
	ws := t.TempDir()
	conf := filepath.Join(ws, ".conch", "config.toml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(conf, []byte("[sandbox.network]\nmode = \"allowlist\"\nallow = [\"listed.example.test\"]\n"), 0o644)
	ts := tools.New(ex, &tools.Options{Projects: config.NewProjects("workspace-write", "public", ""), Sandbox: tools.Sandbox{Mode: "workspace-write", Network: "public"}})
	call := func(sess, dir, line string) string {
		r := ts.Call(context.Background(), tools.Session{ID: sess, Cwd: dir}, "bash",
			json.RawMessage(`{"command":"`+line+`","description":"fetch"}`), nil)
		return r.Text
	}
	if got := call("p1", ws, curl("listed.example.test", netlab.HTTPPort)); !strings.HasPrefix(got, "hello from 203.0.113.10") {
		t.Errorf("listed: %q", got)
	}
	if got, want := call("p1", ws, curl("other.example.test", netlab.HTTPPort)), "[sandbox: network access to other.example.test:80 denied (not in the allowlist)]"; !strings.Contains(got, want) {
		t.Errorf("unlisted: %q, want %q", got, want)
	}
	// Another session, elsewhere, keeps the public network.
	if got := call("p2", t.TempDir(), curl("other.example.test", netlab.HTTPPort)); !strings.HasPrefix(got, "hello from 203.0.113.11") {
		t.Errorf("elsewhere: %q", got)
	}
	wide := t.TempDir()
	os.MkdirAll(filepath.Join(wide, ".conch"), 0o755)
	os.WriteFile(filepath.Join(wide, ".conch", "config.toml"), []byte("[sandbox.network]\nallow_local = [\"127.0.0.1:5432\"]\n"), 0o644)
	if got := call("p3", wide, "echo ran"); !strings.Contains(got, ".conch/config.toml:2: sandbox.network.allow_local: a project file may only add") {
		t.Errorf("a widening project: %q", got)
	}
}
