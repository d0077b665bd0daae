//go:build linux

package contained_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// runIn runs command for owner with workspace ws and narrowing n; err is
// the run's error.
func runIn(t *testing.T, ex shell.Executor, owner, ws, command string, n *shell.SandboxNarrowing) (shell.Result, error) {
	t.Helper()
	spec, err := ex.Resolve(shell.Request{Command: command, Owner: owner, Workspace: ws, Workdir: ws, Narrowing: n})
	if err != nil {
		t.Fatal(err)
	}
	return shell.Run(context.Background(), ex, spec)
}

// TestNarrowedOwner: the Narrowing of an owner's first command makes its
// init's sandbox stricter, for all its commands; another owner keeps the
// executor's; an executor without a sandbox refuses a Narrowing.
func TestNarrowedOwner(t *testing.T) {
	marker := testutil.Marker(t)
	base, o := sandboxedWorkspace(t, "conch-narrow-")
	ex := newExecutor(t, marker, local.Options{}, o)
	wsN, wsW := filepath.Join(base, "n"), filepath.Join(base, "w")
	for _, d := range []string{wsN, wsW} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ro := &shell.SandboxNarrowing{Mode: "read-only"}
	for i, n := range []*shell.SandboxNarrowing{ro, nil} { // the second command without: still the init's
		r, err := runIn(t, ex, "N", wsN, "touch x", n)
		if err != nil || r.ExitCode == nil || *r.ExitCode == 0 || r.Sandbox == nil || r.Sandbox.Mode != "read-only" {
			t.Errorf("narrowed owner's command %d: %+v, %v; want the write denied under read-only", i, r.Sandbox, err)
		}
	}
	if r, err := runIn(t, ex, "W", wsW, "touch x && echo ok", nil); err != nil || r.Stdout.Text != "ok\n" || r.Sandbox == nil || r.Sandbox.Mode != "workspace-write" {
		t.Errorf("other owner: %q %q %+v, %v", r.Stdout.Text, r.Stderr.Text, r.Sandbox, err)
	}
	if _, err := runIn(t, ex, "X", wsW, "true", &shell.SandboxNarrowing{Mode: "full-access"}); err == nil {
		t.Error("a Narrowing that widens ran")
	}

	plain := newExecutor(t, marker, local.Options{}, nil)
	if _, err := runIn(t, plain, "N", wsN, "true", ro); !errors.Is(err, local.ErrNoSandbox) {
		t.Errorf("a Narrowing without a sandbox: %v, want local.ErrNoSandbox", err)
	}
}
