//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestGitWorkflows: what a developer does with git in the workspace
// works through the real binary on the defaults, with the git guard of
// the sandbox's supervisor (docs/sandbox.md#git): commits, branches, a
// stash, a rebase, a linked worktree, a clone and a bare clone of a local
// repository, a submodule of one, a remote added to a clone. As root and
// as uid 65534.
func TestGitWorkflows(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			home, ws := sandboxDirs(t, nobody)
			src := filepath.Join(home, "src") // outside the workspace: cloned from, never written
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			for _, c := range [][]string{
				{"git", "init", "-q", src},
				{"git", "-C", src, "-c", "user.name=s", "-c", "user.email=s@x", "commit", "-q", "--allow-empty", "-m", "src"},
				{"git", "init", "-q", ws},
				{"git", "-C", ws, "-c", "user.name=s", "-c", "user.email=s@x", "commit", "-q", "--allow-empty", "-m", "first"},
			} {
				// The workspace may be the unprivileged user's already.
				c = append([]string{c[0], "-c", "safe.directory=*"}, c[1:]...)
				if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%q: %v\n%s", c, err, out)
				}
			}
			if nobody {
				chownTree(t, home)
				chownTree(t, ws)
			}
			script := `set -e
export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x
echo a > a && git add a && git commit -qm a
git branch b1 && git checkout -q b1 && echo b > b && git add b && git commit -qm b && git checkout -q -
echo c >> a && git stash -q && git stash pop -q && git checkout -q a
git rebase -q b1
git worktree add -q wt b1 && git -C wt log --format=%s -1
git clone -q ` + src + ` clone && git -C clone log --format=%s
git clone -q --bare ` + src + ` bare.git && git -C bare.git log --format=%s
git -c protocol.file.allow=always submodule add -q ` + src + ` sm 2>/dev/null; git -C sm log --format=%s
git -C clone remote add other ` + src + ` && git -C clone config user.name n && git -C clone fetch -q other
git log --format=%s`
			cmd := testutil.Conch(t, marker, "run", "--cwd", ws, "--", script)
			cmd.Env = append(cmd.Env, "HOME="+home)
			if nobody {
				testutil.Unprivileged(t, cmd)
				dir := testutil.UnprivilegedDir(t)
				cmd.Env = append(cmd.Env, "TMPDIR="+dir, "XDG_STATE_HOME="+dir)
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			cmd.Run()
			// git submodule add cannot record the submodule in the
			// workspace repository's own configuration, which stays
			// read-only (the submodule works, and .gitmodules has it).
			want := "b\nsrc\nsrc\nsrc\nb\na\nfirst\n[sandbox: " + ws + "/.git/config is read-only (protected)]\n"
			if out.String() != want {
				t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %s", out.String(), want, errb.String())
			}
		})
	}
}
