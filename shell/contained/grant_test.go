//go:build linux

package contained_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// TestGrantedOwner: a directory granted to an owner (Request.Grants) is
// writable by the owner's commands from the first command that carries
// it, which runs in a wider init; a command the owner started before
// keeps running in its own; another owner still cannot write there; the
// owner's end ends every init of it.
func TestGrantedOwner(t *testing.T) {
	marker := testutil.Marker(t)
	base, err := os.MkdirTemp("/var/tmp", "conch-grant-") // outside /tmp, which stays writable
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws, sib := filepath.Join(base, "ws"), filepath.Join(base, "sib")
	for _, d := range []string{ws, sib} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", filepath.Join(sib, "repo")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	plan, err := sandbox.Policy{Workspace: ws, TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := initOptions()
	o.Sandbox = plan
	ex := newExecutor(t, marker, local.Options{}, o)
	run := func(owner, command string, grants []string) shell.Result {
		t.Helper()
		spec, err := ex.Resolve(shell.Request{Command: command, Owner: owner, Workspace: ws, Workdir: ws, Grants: grants})
		if err != nil {
			t.Fatal(err)
		}
		r, err := shell.Run(context.Background(), ex, spec)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	write := "echo x > " + filepath.Join(sib, "f") + " && echo ok"
	if r := run("A", write, nil); r.Stdout.Text == "ok\n" || len(r.Sandbox.Denied) == 0 {
		t.Fatalf("before the grant: %q, denied %v; want the write denied", r.Stdout.Text, r.Sandbox.Denied)
	}
	// A command of A that runs across the grant, in A's first init.
	spec, err := ex.Resolve(shell.Request{Command: "echo started; sleep 1071", Owner: "A", Workspace: ws, Workdir: ws})
	if err != nil {
		t.Fatal(err)
	}
	before, err := ex.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the first init's sleep", func() bool {
		for _, p := range testutil.Processes(marker) {
			if testutil.Cmdline(p.Pid) == "sleep 1071" {
				return true
			}
		}
		return false
	})
	grants := []string{sib}
	if r := run("A", write, grants); r.Stdout.Text != "ok\n" {
		t.Errorf("with the grant: %q, %q; want ok", r.Stdout.Text, r.Stderr.Text)
	}
	// The git directories under a granted root are protected as any
	// root's.
	if r := run("A", "echo x > "+filepath.Join(sib, "repo/.git/hooks/pre-commit"), grants); r.ExitCode == nil || *r.ExitCode == 0 {
		t.Errorf("a hook of a repository under the grant was written: %q", r.Stderr.Text)
	}
	if r := run("B", strings.Replace(write, "/f ", "/g ", 1), nil); r.Stdout.Text == "ok\n" {
		t.Error("another owner wrote in A's granted directory")
	}
	if before.Status() != shell.StatusRunning {
		t.Errorf("A's command from before the grant: %v, want still running", before.Status())
	}
	ex.EndOwner("A")
	<-before.Done()
	if before.Status() != shell.StatusKilled {
		t.Errorf("A's command from before the grant after EndOwner: %v, want killed", before.Status())
	}
}
