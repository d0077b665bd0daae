//go:build linux

package cachelayer

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSweepDropsAnEarlierBoot: a session whose server died is committed
// by the next Begin, unless it was made before the machine last started,
// when what its commands wrote may be torn: then it is removed.
func TestSweepDropsAnEarlierBoot(t *testing.T) {
	if bootID() == "" {
		t.Skip("the kernel gives no boot id")
	}
	for _, tc := range []struct {
		name, boot string
		kept       bool
	}{
		{"this boot", bootID(), true},
		{"an earlier boot", "00000000-0000-0000-0000-000000000000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s, err := Begin(root)
			if err != nil {
				t.Fatal(err)
			}
			const cache = "/home/u/.cache/go-build"
			upper := Upper(s.Dir, cache)
			if err := os.MkdirAll(upper, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(upper, "f"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.lock.Name(), []byte(tc.boot), 0o600); err != nil {
				t.Fatal(err)
			}
			s.lock.Close() // the server died: its lock is free, nothing committed
			next, err := Begin(root)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close()
			_, err = os.Stat(filepath.Join(Shared(root, cache), "f"))
			if kept := err == nil; kept != tc.kept {
				t.Errorf("the dead session's file in the shared layer: %v, want %v", kept, tc.kept)
			}
			if _, err := os.Stat(s.Dir); err == nil {
				t.Errorf("the dead session's directory %s is still there", s.Dir)
			}
		})
	}
}

// TestWrote: commit syncs the disk before it merges a session that wrote
// to a cache (its volatile overlays synced nothing), and only then.
func TestWrote(t *testing.T) {
	session := t.TempDir()
	for _, key := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(session, key, "upper"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(session, "c"), 0o700); err != nil {
		t.Fatal(err) // no upper directory: a cache the layer could not hold
	}
	ents := func() []os.DirEntry {
		e, err := os.ReadDir(session)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if wrote(session, ents()) {
		t.Error("a session with empty upper directories wrote")
	}
	// Any entry counts (a directory here; a whiteout, a deletion, is one).
	if err := os.Mkdir(filepath.Join(session, "b", "upper", "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if !wrote(session, ents()) {
		t.Error("a session with an entry in an upper directory did not write")
	}
	if err := syncFS(session); err != nil {
		t.Errorf("syncFS: %v", err)
	}
}

// TestBeginClearsSpareWork: a session that takes a spare finds no work
// directory of the spare's earlier mounts in it (overlayfs would remove
// it in the init, on the session's path, and refuses to mount one a
// volatile mount left), whatever its mode (overlayfs makes it 0): Begin
// sets it aside, and ClearLater, or Close without it, removes it.
func TestBeginClearsSpareWork(t *testing.T) {
	for _, later := range []bool{false, true} {
		beginClearsSpareWork(t, later)
	}
}

func beginClearsSpareWork(t *testing.T, later bool) {
	root := t.TempDir()
	const key = "0123456789ab-cache"
	spare := filepath.Join(root, "spare", "s1", key)
	dirty := filepath.Join(spare, "work", "work", "incompat", "volatile", "dirty")
	if err := os.MkdirAll(dirty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(spare, "upper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(spare, "work", "work"), 0); err != nil {
		t.Fatal(err)
	}
	s, err := Begin(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(s.Dir, key, "upper"), filepath.Join(s.Dir, key, "work")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the spare's %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, key, "work", "work")); err == nil {
		t.Error("the spare's overlayfs work directory is still there")
	}
	trash := filepath.Join(root, "trash", filepath.Base(s.Dir)+"."+key)
	if _, err := os.Lstat(trash); err != nil {
		t.Errorf("not set aside: %v", err)
	}
	if later {
		s.ClearLater()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(filepath.Join(root, "trash")); err != nil || len(left) > 0 {
		t.Errorf("after ClearLater %v and Close, the trash holds %v (%v)", later, left, err)
	}
}

// TestSweepEmptiesTrash: what a session set aside and did not remove
// (its server was killed) goes when a later Begin sweeps that session.
func TestSweepEmptiesTrash(t *testing.T) {
	root := t.TempDir()
	const id = "0123abcd"
	left := filepath.Join(root, "trash", id+".0123456789ab-cache", "work")
	other := filepath.Join(root, "trash", "feedbeef.0123456789ab-cache")
	for _, d := range []string{filepath.Join(root, "sessions", id), left, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sessions", id+".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Begin(root)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Lstat(filepath.Dir(left)); err == nil {
		t.Error("the swept session's trash is still there")
	}
	// Another session's, whose lock may be held: not this sweep's.
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("another session's trash: %v", err)
	}
}

// TestReadyAtClose: a server's session (ReadyAtClose) leaves its spare
// without its mounts' overlay work directories, so that the next
// session's start removes nothing; conch run's leaves them to the next
// Begin, beside its init's start.
func TestReadyAtClose(t *testing.T) {
	for _, ready := range []bool{false, true} {
		root := t.TempDir()
		s, err := Begin(root)
		if err != nil {
			t.Fatal(err)
		}
		s.ReadyAtClose = ready
		key := filepath.Join(s.Dir, "0123456789ab-cache")
		work := filepath.Join(key, "work", "work")
		for _, d := range []string{filepath.Join(key, "upper"), filepath.Join(work, "incompat", "volatile", "dirty")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(work, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		spares, _ := filepath.Glob(filepath.Join(root, "spare", "*", "0123456789ab-cache"))
		if len(spares) != 1 {
			t.Fatalf("ready %v: spares %v, want one", ready, spares)
		}
		_, err = os.Lstat(filepath.Join(spares[0], "work", "work"))
		if left := err == nil; left == ready {
			t.Errorf("ready %v: the spare's overlay work directory left: %v", ready, left)
		}
		os.Chmod(filepath.Join(spares[0], "work", "work"), 0o700) // for TempDir's removal
	}
}

// TestClearVolatile: a volatile mount's leftovers in a work directory
// (which overlayfs refuses to mount again) are removed; a work
// directory without them is left as it is.
func TestClearVolatile(t *testing.T) {
	session, dir := t.TempDir(), "/home/u/.cache"
	if err := Prepare(session, dir); err != nil {
		t.Fatal(err)
	}
	ClearVolatile(session, dir) // nothing there
	if _, err := os.Stat(Work(session, dir)); err != nil {
		t.Fatalf("the work directory: %v", err)
	}
	dirty := filepath.Join(Work(session, dir), "work", "incompat", "volatile", "dirty")
	if err := os.MkdirAll(dirty, 0o700); err != nil {
		t.Fatal(err)
	}
	ClearVolatile(session, dir)
	if _, err := os.Lstat(filepath.Join(Work(session, dir), "work", "incompat")); !os.IsNotExist(err) {
		t.Errorf("the volatile leftovers: %v, want them gone", err)
	}
	if _, err := os.Stat(filepath.Join(Work(session, dir), "work")); err != nil {
		t.Errorf("overlayfs's work directory: %v", err)
	}
}
