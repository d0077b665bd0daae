//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestSearchRecord: with Policy.SearchCache, the next Resolve takes the
// directories unchanged since the last one from its record, reading
// none of them, and still finds every repository made, moved or removed
// since, in a directory old or new: their hooks and config are protected
// as without a record.
func TestSearchRecord(t *testing.T) {
	defer func(r time.Duration) { searchRacy = r }(searchRacy)
	searchRacy = 50 * time.Millisecond
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, record := filepath.Join(base, "ws"), filepath.Join(base, "record")
	for _, d := range []string{"a/b/c", "a/r1", "d/e/f", "node_modules/x"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, filepath.Join(ws, "a", "r1"), "init", "-q")
	// The tree's change times must be older than the racy window to be
	// recorded.
	settled := func() {
		t.Helper()
		now := time.Now()
		testutil.WaitFor(t, 5*time.Second, "the tree's change times left the racy window", func() bool {
			return time.Since(now) > 2*searchRacy
		})
	}
	settled()
	resolve := func() *Plan {
		t.Helper()
		pl, err := Policy{Workspace: ws, TempDirs: []string{filepath.Join(base, "tmp")}, SearchCache: record}.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	search := func() (repos []string, reads, dirs int) {
		t.Helper()
		s := newSearcher(record, ws)
		repos = findRepos(ws, s)
		s.save()
		return repos, s.reads, len(s.new)
	}
	hooks := func(repo string) string { return filepath.Join(ws, repo, ".git", "hooks") }
	if pl := resolve(); !slices.Contains(pl.Protected, hooks("a/r1")) {
		t.Fatalf("a/r1's hooks not protected: %q", pl.Protected)
	}
	if repos, reads, _ := search(); reads != 0 || !slices.Equal(repos, []string{filepath.Join(ws, "a", "r1")}) {
		t.Errorf("the search after a recorded one read %d directories and found %q; want none read, a/r1 found", reads, repos)
	}

	// A repository born in an old directory and one in a new one, and
	// one removed.
	git(t, filepath.Join(ws, "a", "b", "c"), "init", "-q", "r2")
	if err := os.MkdirAll(filepath.Join(ws, "d", "e", "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, filepath.Join(ws, "d", "e", "new"), "init", "-q")
	if err := os.RemoveAll(filepath.Join(ws, "a", "r1", ".git")); err != nil {
		t.Fatal(err)
	}
	pl := resolve()
	for _, repo := range []string{"a/b/c/r2", "d/e/new"} {
		if !slices.Contains(pl.Protected, hooks(repo)) || !slices.Contains(pl.Pinned, filepath.Join(ws, repo, ".git")) {
			t.Errorf("%s, born after the record, not protected: %q %q", repo, pl.Protected, pl.Pinned)
		}
	}
	if slices.Contains(pl.Pinned, filepath.Join(ws, "a", "r1", ".git")) {
		t.Errorf("a/r1's removed .git still pinned: %q", pl.Pinned)
	}
	// The record is rewritten only when an eighth of it changed: the
	// next searches read the few directories changed since, no more.
	settled()
	want := []string{filepath.Join(ws, "a", "b", "c", "r2"), filepath.Join(ws, "d", "e", "new")}
	if repos, reads, dirs := search(); reads == 0 || reads > 6 || !slices.Equal(repos, want) {
		t.Errorf("the search after the changes read %d of %d directories and found %q; want the changed ones read (at most 6), %q", reads, dirs, repos, want)
	}

	// Without a record, the same repositories.
	if repos := findRepos(ws, newSearcher("", ws)); !slices.Equal(repos, want) {
		t.Errorf("without a record: %q, want %q", repos, want)
	}
}
