//go:build linux

package acp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestSessionWorkspaces: under workspace-write, each ACP session's
// sandbox is built for its own cwd (session/new), not the server's: a
// session writes in its cwd, not in another session's, and the hooks of
// the repository in its cwd are protected (docs/sandbox.md#in-conch).
func TestSessionWorkspaces(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	// Outside the temp dirs, which every session may write.
	var dirs [2]string
	for i := range dirs {
		d, err := os.MkdirTemp("/var/tmp", "conchtest-ws-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dirs[i] = d
	}
	if out, err := exec.Command("git", "init", "-q", dirs[0]).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}

	// Each denied write would be offered to run again outside the
	// sandbox; that question has its own tests (escalate_test.go).
	p := startConch(t, state, work, marker, nil, "--sandbox", "workspace-write", "--sandbox-escalation", "never")
	c := p.cli
	c.initialize(false)
	sids := [2]string{c.newSession(dirs[0]), c.newSession(dirs[1])}
	for i, sid := range sids {
		other := dirs[1-i]
		c.prompt(sid, "touch mine; touch "+filepath.Join(other, "theirs"))
		if _, err := os.Stat(filepath.Join(dirs[i], "mine")); err != nil {
			t.Errorf("session %d could not write in its cwd %s: %v", i, dirs[i], err)
		}
		if _, err := os.Stat(filepath.Join(other, "theirs")); err == nil {
			t.Errorf("session %d wrote in the other session's cwd %s", i, other)
		}
	}
	_, us := c.prompt(sids[0], "echo x > .git/hooks/pre-commit")
	hook := filepath.Join(dirs[0], ".git", "hooks", "pre-commit")
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("session 0 planted a hook in its repository")
	}
	if out := jsonString(us); !strings.Contains(out, "is read-only (protected)") {
		t.Errorf("the hook's write has no protected marker: %s", out)
	}
	p.eof(marker)
}
