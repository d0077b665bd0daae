//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGranted: a granted directory becomes a writable root of the plan,
// for its workspace and narrowing as they were, with the repositories
// under it protected; full-access is left as it is, read-only refuses.
func TestGranted(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sib, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, sib, "init", "-q", ".")
	p, err := Policy{Workspace: ws}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Narrowed("", "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := n.Granted([]string{sib})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g.Writable, ws) || !slices.Contains(g.Writable, sib) || g.Network != NetworkOff || g.Mode != WorkspaceWrite {
		t.Errorf("granted: %+v; want %s and %s writable, the network still off", g, ws, sib)
	}
	if !slices.Contains(g.Protected, filepath.Join(sib, ".git", "hooks")) || !slices.Contains(g.Protected, filepath.Join(sib, ".git", "config")) {
		t.Errorf("granted: protected %v; want the granted repository's hooks and config", g.Protected)
	}
	if same, err := n.Granted(nil); err != nil || same != n {
		t.Errorf("nothing granted: %p, %v; want the plan itself", same, err)
	}
	full, err := Policy{Mode: FullAccess}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if same, err := full.Granted([]string{sib}); err != nil || same != full {
		t.Errorf("full-access granted: %+v, %v", same, err)
	}
	ro, err := Policy{Mode: ReadOnly, Workspace: ws, TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Granted([]string{sib}); err == nil || err.Error() != "sandbox: writes cannot be granted under read-only mode" {
		t.Errorf("read-only granted: %v", err)
	}
}
