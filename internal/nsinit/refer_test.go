//go:build linux

package nsinit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/sandbox"
)

// TestSandboxRefer: in workspace-write mode, rename(2) and link(2)
// between directories of the writable roots work (Landlock's REFER):
// git mv into a directory, a hard link, git push to a file remote in
// /tmp, a setuptools wheel build in a venv of Debian's python3; and the
// protected paths and /etc stay out of reach of both.
func TestSandboxRefer(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	script := `set -e
mkdir d e && echo a > a && git add a && git commit -qm a && git mv a d/ && echo moved
ln d/a e/b && echo linked
r=$(mktemp -d /tmp/conch-remote-XXXXXX); trap 'rm -rf $r' EXIT
git init -q --bare $r && git push -q $r HEAD:refs/heads/main 2>&1 && echo pushed`
	if code, stdout, stderr := h.runIn(t, in, script); code != 0 || stdout != "moved\nlinked\npushed\n" {
		t.Errorf("status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, attack := range []string{
		`ln .git/config cfg`, `ln .git/hooks/pre-commit.sample hook`, `mv .git/hooks hooks`,
		`mv .git/config d/`, `ln /etc/passwd passwd`, `mv d/a /etc/conch-refer-test`,
	} {
		if code, _, stderr := h.runIn(t, in, attack); code == 0 {
			t.Errorf("%s: went through", attack)
		} else if !strings.Contains(stderr, "cross-device") && !strings.Contains(stderr, "busy") && !strings.Contains(stderr, "denied") && !strings.Contains(stderr, "Read-only") && !strings.Contains(stderr, "not permitted") {
			t.Errorf("%s: %q", attack, stderr)
		}
	}
	os.Remove("/etc/conch-refer-test")
	if b := readFile(t, filepath.Join(h.ws, ".git", "config")); !strings.Contains(b, "[core]") {
		t.Errorf(".git/config: %q", b)
	}
}

// TestSandboxWheelBuild: pip builds and installs a setuptools project as
// a wheel in a venv of Debian's python3 (with its wheel package), which
// renames files across directories of the workspace.
func TestSandboxWheelBuild(t *testing.T) {
	if err := exec.Command(python3, "-c", "import venv, wheel, setuptools").Run(); err != nil {
		t.Skipf("Debian's python3 lacks venv, wheel or setuptools: %v", err)
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	script := `set -e
mkdir -p proj/pkg && touch proj/pkg/__init__.py
printf 'from setuptools import setup\nsetup(name="pkg", version="0.1", packages=["pkg"])\n' > proj/setup.py
` + python3 + ` -m venv --system-site-packages venv
venv/bin/pip install -q --no-build-isolation --no-index ./proj 2>&1
venv/bin/python -c 'import pkg; print("imported")'`
	if code, stdout, stderr := h.runLong(t, in, script, 2*time.Minute); code != 0 || !strings.HasSuffix(stdout, "imported\n") {
		t.Errorf("status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
