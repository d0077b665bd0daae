//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestResolveFindsRepositories: the hooks and config of every repository
// under the workspace are protected, nested ones included; a linked
// worktree's git directories outside the workspace become writable with
// their hooks and config protected; a submodule's hooks and config are
// protected; a missing hooks directory is created.
func TestResolveFindsRepositories(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(base, "main")
	ws := filepath.Join(base, "ws")
	nested := filepath.Join(ws, "a", "b", "nested")
	for _, d := range []string{main, nested} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		git(t, d, "init", "-q")
	}
	os.RemoveAll(filepath.Join(nested, ".git", "hooks"))
	// A submodule's git directory, as git keeps it in the superproject.
	sub := filepath.Join(nested, ".git", "modules", "lib")
	git(t, base, "init", "-q", "--bare", sub)
	git(t, main, "commit", "-q", "--allow-empty", "-m", "x")
	git(t, main, "worktree", "add", "-q", filepath.Join(ws, "wt"))

	tmp := filepath.Join(base, "tmp")
	pl, err := Policy{Workspace: ws, TempDirs: []string{tmp}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if pl.Mode != WorkspaceWrite || pl.Network != NetworkOn {
		t.Errorf("defaults: %s %s", pl.Mode, pl.Network)
	}
	for _, p := range []string{
		filepath.Join(nested, ".git", "hooks"),
		filepath.Join(nested, ".git", "config"),
		filepath.Join(main, ".git", "hooks"),
		filepath.Join(main, ".git", "config"),
		filepath.Join(sub, "hooks"),
		filepath.Join(sub, "config"),
		filepath.Join(ws, "wt", ".git"),
	} {
		if !slices.Contains(pl.Protected, p) {
			t.Errorf("%s not protected: %q", p, pl.Protected)
		}
	}
	for _, p := range []string{ws, tmp, filepath.Join(main, ".git"), filepath.Join(main, ".git", "worktrees", "wt")} {
		if !slices.Contains(pl.Writable, p) {
			t.Errorf("%s not writable: %q", p, pl.Writable)
		}
	}
	for _, p := range []string{filepath.Join(nested, ".git"), sub, filepath.Join(main, ".git"), filepath.Join(main, ".git", "worktrees", "wt")} {
		if !slices.Contains(pl.Pinned, p) {
			t.Errorf("%s not pinned: %q", p, pl.Pinned)
		}
	}
	if slices.Contains(pl.Writable, main) {
		t.Errorf("the main checkout became writable: %q", pl.Writable)
	}
}

func TestResolveModes(t *testing.T) {
	ro, err := Policy{Mode: ReadOnly, Workspace: "/w", TempDirs: []string{"/tmp"}, Caches: []string{"/c"}, CacheLayer: "/l"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ro.Writable, []string{"/tmp"}) {
		t.Errorf("read-only writable = %q, want only the temp dirs", ro.Writable)
	}
	full, err := Policy{Mode: FullAccess, Workspace: "/w"}.Resolve()
	if err != nil || full.Writable != nil {
		t.Errorf("full-access: %v %q", err, full.Writable)
	}
	for _, p := range []Policy{{Mode: "yolo", Workspace: "/w"}, {Network: "maybe", Workspace: "/w"}, {}} {
		if _, err := p.Resolve(); err == nil {
			t.Errorf("Resolve(%+v) accepted", p)
		}
	}
}

// TestProbe: Probe reports this host's Landlock ABI and seccomp, or why
// Landlock is missing (a kernel without it, or not enabled at boot).
func TestProbe(t *testing.T) {
	s := Probe()
	if s.LandlockErr != nil {
		if !strings.HasPrefix(s.LandlockErr.Error(), "landlock: ") || s.LandlockABI != 0 {
			t.Errorf("Probe() = %+v: an error must say landlock and come with ABI 0", s)
		}
		t.Skipf("no Landlock here: %v", s.LandlockErr)
	}
	if s.LandlockABI < 1 || !s.Seccomp {
		t.Errorf("Probe() = %+v, want a Landlock ABI and seccomp", s)
	}
	t.Logf("Landlock ABI %d, seccomp %v", s.LandlockABI, s.Seccomp)
}

// TestResolveEnclosingRepository: a workspace inside a repository gets
// that repository's git directory writable (commits work) with its hooks
// protected; a workspace that is a repository of its own leaves a
// repository above it (a dotfiles repository in the home) alone.
func TestResolveEnclosingRepository(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	git(t, base, "init", "-q")
	sub := filepath.Join(base, "sub")
	own := filepath.Join(base, "own")
	for _, d := range []string{sub, own} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, own, "init", "-q")
	top := filepath.Join(base, ".git")
	pl, err := Policy{Workspace: sub}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pl.Writable, top) || !slices.Contains(pl.Protected, filepath.Join(top, "hooks")) {
		t.Errorf("workspace in a repository: writable %q, protected %q", pl.Writable, pl.Protected)
	}
	pl, err = Policy{Workspace: own}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pl.Writable, top) || slices.Contains(pl.Pinned, top) {
		t.Errorf("a repository of its own made the one above it writable: %q, pinned %q", pl.Writable, pl.Pinned)
	}
}

// TestForWorkspaceFullAccess: a full-access plan made by hand (the plan
// of commands a user let out of the sandbox) serves every session's
// workspace as it is; another hand-made plan cannot be moved.
func TestForWorkspaceFullAccess(t *testing.T) {
	full := &Plan{Mode: FullAccess, Network: NetworkOn}
	got, err := full.ForWorkspace(t.TempDir())
	if err != nil || got != full {
		t.Errorf("full-access ForWorkspace = %v, %v; want the plan itself", got, err)
	}
	ro := &Plan{Mode: ReadOnly, Network: NetworkOn}
	if _, err := ro.ForWorkspace(t.TempDir()); err == nil {
		t.Error("a read-only plan not made by Resolve moved to another workspace")
	}
}

// Narrowed makes a plan stricter, never wider: a project's mode, network
// off and hidden paths (relative ones in the workspace).
func TestNarrowed(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Mode{FullAccess, WorkspaceWrite} {
		p, err := Policy{Mode: m, Workspace: ws, TempDirs: []string{tmp}, DenyRead: []string{"/etc/shadow"}}.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		n, err := p.Narrowed("", ReadOnly, true, []string{"secrets"})
		if err != nil {
			t.Fatal(err)
		}
		if n.Mode != ReadOnly || n.Network != NetworkOff || !slices.Equal(n.Writable, []string{tmp}) ||
			!slices.Equal(n.DenyRead, []string{"/etc/shadow", filepath.Join(ws, "secrets")}) {
			t.Errorf("%s narrowed: %+v", m, n)
		}
		if same, err := p.Narrowed("", "", false, nil); err != nil || same.Mode != m || same.Network != NetworkOn {
			t.Errorf("%s narrowed by nothing: %+v, %v", m, same, err)
		}
	}
	ww, err := Policy{Workspace: ws}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	other, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ww.Narrowed(other, "", true, nil); err != nil || n.Network != NetworkOff || !slices.Contains(n.Writable, other) || slices.Contains(n.Writable, ws) {
		t.Errorf("narrowed for another workspace: %+v, %v; want %s writable, not %s", n, err, other, ws)
	}
	ro, err := Policy{Mode: ReadOnly, Workspace: ws}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Narrowed("", WorkspaceWrite, false, nil); err == nil || err.Error() != "sandbox: a project may not widen read-only to workspace-write" {
		t.Errorf("widening: %v", err)
	}
	if _, err := (&Plan{Mode: WorkspaceWrite}).Narrowed("", ReadOnly, false, nil); err == nil {
		t.Error("a plan not made by Resolve narrowed")
	}
}

// TestResolveRefusesPlantedGitDirs: a .git entry a command could have
// planted in the workspace does not make a directory outside it
// writable: not a symlink to it, not a .git file naming it (even one that
// holds HEAD), not a commondir naming it; a real linked worktree's git
// directory outside the workspace still is (TestResolveFindsRepositories).
func TestResolveRefusesPlantedGitDirs(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, home, other := filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(ws, "viafile"), filepath.Join(ws, "viacommon", "gd"), home, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "viafile", ".git"), []byte("gitdir: "+other+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gd := filepath.Join(ws, "viacommon", "gd")
	if err := os.WriteFile(filepath.Join(ws, "viacommon", ".git"), []byte("gitdir: gd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gd, "commondir"), []byte(home+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pl, err := Policy{Workspace: ws, TempDirs: []string{filepath.Join(base, "tmp")}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{home, other} {
		if within(d, pl.Writable) || slices.Contains(pl.Pinned, d) {
			t.Errorf("%s made writable (%q) or pinned (%q) by a planted .git", d, pl.Writable, pl.Pinned)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "hooks")); err == nil {
		t.Error("Resolve created hooks in the planted git directory")
	}
}

// TestResolveConchDirs: a writable root's .conch directory (a project's
// file) is protected; conch's own directories are hidden, except one
// that is itself a writable root, and with the writable roots inside
// them kept for Mount.
func TestResolveConchDirs(t *testing.T) {
	base := t.TempDir()
	ws, state, tmp, conf := filepath.Join(base, "ws"), filepath.Join(base, "state"), filepath.Join(base, "state", "tmp"), filepath.Join(base, "conf")
	for _, d := range []string{filepath.Join(ws, ".conch"), tmp, conf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pl, err := Policy{Workspace: ws, TempDirs: []string{tmp}, Hidden: []string{state, conf, tmp, filepath.Join(base, "missing")}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pl.Protected, filepath.Join(ws, ".conch")) {
		t.Errorf("protected %q lacks the workspace's .conch", pl.Protected)
	}
	if want := []string{state, conf}; !slices.Equal(pl.Hidden, want) {
		t.Errorf("hidden %q, want %q", pl.Hidden, want)
	}
}
