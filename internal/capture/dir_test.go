package capture

import (
	"bytes"
	"errors"
	"github.com/conch-dev/conch/shell"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forceNames makes randomName return names in order, then real random
// ones.
func forceNames(t *testing.T, names ...string) {
	t.Helper()
	orig := randomName
	t.Cleanup(func() { randomName = orig })
	randomName = func() string {
		if len(names) == 0 {
			return orig()
		}
		n := names[0]
		names = names[1:]
		return n
	}
}

// spilled returns a closed stream of d that spilled data.
func spilled(t *testing.T, d *Dir, data []byte) *Stream {
	t.Helper()
	s := NewStream(d, "stdout", 10, 1<<30)
	s.Write(data)
	s.Close()
	if s.Output().SpillPath == "" {
		t.Fatalf("no spill: %v", s.SpillErr())
	}
	return s
}

func TestSpillDeletedPastMaxSpill(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := NewStream(d, "stdout", 10, 100)
	data := pattern(101)
	s.Write(data[:50])
	path := s.SpillPath()
	if path == "" {
		t.Fatal("no spill after overflow")
	}
	s.Write(data[50:100]) // exactly maxSpill: still kept
	if s.SpillPath() != path || !bytes.Equal(mustRead(t, path), data[:100]) {
		t.Fatal("spill of exactly maxSpill bytes was not kept whole")
	}
	s.Write(data[100:])
	if got := s.SpillPath(); got != "" {
		t.Errorf("SpillPath() = %q past maxSpill", got)
	}
	if exists(path) {
		t.Error("spill file still exists past maxSpill")
	}
	s.Write([]byte("more"))
	s.Close()
	if out := s.Output(); out.SpillPath != "" || !out.Truncated {
		t.Errorf("Output() = {Truncated:%v SpillPath:%q}", out.Truncated, out.SpillPath)
	}
	if ce, ok := s.SpillErr().(*shell.SpillCapError); !ok || ce.Cap != s.maxSpill {
		t.Errorf("SpillErr() = %v, want a *shell.SpillCapError for %d", s.SpillErr(), s.maxSpill)
	}
	if out := s.Output(); out.SpillErr == nil || out.SpillErr.Error() != s.SpillErr().Error() {
		t.Errorf("Output().SpillErr = %v, want %v", out.SpillErr, s.SpillErr())
	}
	if got := d.usedBytes(); got != 0 {
		t.Errorf("budget in use %d after the file was deleted", got)
	}
	if files := spillFiles(t, d); len(files) != 0 {
		t.Errorf("files left: %v", files)
	}
}

func TestFirstOverflowPastMaxSpillCreatesNothing(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := NewStream(d, "stdout", 10, 20)
	s.Write(pattern(21))
	s.Close()
	if out := s.Output(); out.SpillPath != "" || d.Path() != "" {
		t.Errorf("SpillPath %q, dir %q; want neither", out.SpillPath, d.Path())
	}
	if _, ok := s.SpillErr().(*shell.SpillCapError); !ok {
		t.Errorf("SpillErr() = %v", s.SpillErr())
	}
}

func TestPlantedSymlinkIsNeverFollowed(t *testing.T) {
	d := newTestDir(t, 1<<30)
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(outside, "dangling")
	planted := strings.Repeat("a", 32)
	plantedToo := strings.Repeat("b", 32)
	fresh := strings.Repeat("c", 32)
	forceNames(t, strings.Repeat("0", 32), planted, plantedToo, fresh)

	spilled(t, d, pattern(20)) // creates the directory, under the first name
	if err := os.Symlink(target, filepath.Join(d.Path(), planted+"-stdout")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dangling, filepath.Join(d.Path(), plantedToo+"-stdout")); err != nil {
		t.Fatal(err)
	}
	data := pattern(50)
	s := spilled(t, d, data)
	if got, want := s.Output().SpillPath, filepath.Join(d.Path(), fresh+"-stdout"); got != want {
		t.Errorf("SpillPath = %q, want %q", got, want)
	}
	if !bytes.Equal(mustRead(t, s.Output().SpillPath), data) {
		t.Error("spill file differs from the stream")
	}
	if got := string(mustRead(t, target)); got != "precious" {
		t.Errorf("symlink target now holds %q", got)
	}
	if exists(dangling) {
		t.Error("a dangling symlink's target was created")
	}
}

func TestEveryNamePlantedMeansNoSpill(t *testing.T) {
	d := newTestDir(t, 1<<30)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	planted := strings.Repeat("d", 32)
	names := []string{strings.Repeat("0", 32)}
	for range createAttempts {
		names = append(names, planted)
	}
	forceNames(t, names...)
	spilled(t, d, pattern(20))
	if err := os.Symlink(target, filepath.Join(d.Path(), planted+"-stdout")); err != nil {
		t.Fatal(err)
	}
	s := NewStream(d, "stdout", 10, 1<<30)
	s.Write(pattern(30))
	s.Close()
	if out := s.Output(); out.SpillPath != "" || !out.Truncated || out.Text == "" {
		t.Errorf("Output() = %+v; want the tail and no path", out)
	}
	if !errors.Is(s.SpillErr(), fs.ErrExist) {
		t.Errorf("SpillErr() = %v, want a wrapped fs.ErrExist", s.SpillErr())
	}
	if got := string(mustRead(t, target)); got != "precious" {
		t.Errorf("symlink target now holds %q", got)
	}
	if got, want := d.usedBytes(), int64(20); got != want {
		t.Errorf("budget in use %d, want %d", got, want)
	}
}

func TestBudgetEvictsOldestClosedFirst(t *testing.T) {
	d := newTestDir(t, 300)
	a := spilled(t, d, pattern(100))
	b := spilled(t, d, pattern(100))
	aPath, bPath := a.Output().SpillPath, b.Output().SpillPath

	c := NewStream(d, "stderr", 10, 1<<30)
	c.Write(pattern(150)) // 350 > 300: a goes
	if a.Output().SpillPath != "" || a.SpillPath() != "" || exists(aPath) {
		t.Error("the oldest closed spill was not evicted")
	}
	if !errors.Is(a.SpillErr(), ErrEvicted) {
		t.Errorf("SpillErr() = %v, want ErrEvicted", a.SpillErr())
	}
	if b.Output().SpillPath != bPath {
		t.Error("a newer closed spill was evicted too early")
	}
	c.Write(pattern(100)) // 350 again: b goes
	if b.Output().SpillPath != "" || exists(bPath) {
		t.Error("the second closed spill was not evicted")
	}
	if c.SpillPath() == "" {
		t.Fatal("the live stream lost its spill")
	}
	cPath := c.SpillPath()
	c.Write(pattern(100)) // 350 with nothing left to evict: c fails
	if c.SpillPath() != "" || exists(cPath) {
		t.Error("a stream over the budget kept its spill")
	}
	if !errors.Is(c.SpillErr(), ErrBudget) {
		t.Errorf("SpillErr() = %v, want ErrBudget", c.SpillErr())
	}
	c.Close()
	if got := d.usedBytes(); got != 0 || diskUsage(t, d) != 0 {
		t.Errorf("budget in use %d, on disk %d; want 0", got, diskUsage(t, d))
	}
}

func TestBudgetNeverEvictsLiveStreams(t *testing.T) {
	d := newTestDir(t, 100)
	live := NewStream(d, "stdout", 10, 1<<30)
	live.Write(pattern(60))
	s := NewStream(d, "stderr", 10, 1<<30)
	s.Write(pattern(50))
	if live.SpillPath() == "" {
		t.Error("a live stream's spill was evicted")
	}
	if s.SpillPath() != "" || !errors.Is(s.SpillErr(), ErrBudget) {
		t.Errorf("SpillPath %q, SpillErr %v; want none, ErrBudget", s.SpillPath(), s.SpillErr())
	}
	// A stream bigger than the whole budget never evicts anything.
	live.Close()
	big := NewStream(d, "stdout", 10, 1<<30)
	big.Write(pattern(101))
	if live.Output().SpillPath == "" || !errors.Is(big.SpillErr(), ErrBudget) {
		t.Errorf("live path %q, big SpillErr %v", live.Output().SpillPath, big.SpillErr())
	}
	if got, disk := d.usedBytes(), diskUsage(t, d); got != 60 || disk != 60 {
		t.Errorf("budget in use %d, on disk %d; want 60", got, disk)
	}
	// Nor does a spill that grows past the whole budget.
	grows := NewStream(d, "stdout", 10, 1<<30)
	grows.Write(pattern(30))
	if grows.SpillPath() == "" {
		t.Fatalf("no spill: %v", grows.SpillErr())
	}
	grows.Write(pattern(80))
	if live.Output().SpillPath == "" || !errors.Is(grows.SpillErr(), ErrBudget) {
		t.Errorf("live path %q, growing SpillErr %v", live.Output().SpillPath, grows.SpillErr())
	}
	if got, disk := d.usedBytes(), diskUsage(t, d); got != 60 || disk != 60 {
		t.Errorf("budget in use %d, on disk %d; want 60", got, disk)
	}
}

func TestDirCloseRemovesEverything(t *testing.T) {
	parent := t.TempDir()
	d := NewDir(parent, 1<<30)
	if err := d.Close(); err != nil { // before anything spilled
		t.Fatal(err)
	}
	d = NewDir(parent, 1<<30)
	done := spilled(t, d, pattern(30))
	live := NewStream(d, "stderr", 10, 1<<30)
	live.Write(pattern(30))
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if exists(path) {
		t.Error("the spill directory survived Close")
	}
	if done.Output().SpillPath != "" || !errors.Is(done.SpillErr(), ErrDirClosed) {
		t.Errorf("closed stream: path %q, SpillErr %v", done.Output().SpillPath, done.SpillErr())
	}
	if n, err := live.Write([]byte("more")); n != 4 || err != nil {
		t.Errorf("Write after Dir.Close = %d, %v", n, err)
	}
	live.Close()
	if out := live.Output(); out.SpillPath != "" || !strings.HasSuffix(out.Text, "more") {
		t.Errorf("live stream after Dir.Close: %+v", out)
	}
	if !errors.Is(live.SpillErr(), ErrDirClosed) {
		t.Errorf("SpillErr() = %v, want ErrDirClosed", live.SpillErr())
	}
	late := NewStream(d, "stdout", 10, 1<<30)
	late.Write(pattern(30))
	late.Close()
	if late.Output().SpillPath != "" || !errors.Is(late.SpillErr(), ErrDirClosed) {
		t.Errorf("spill after Dir.Close: path %q, SpillErr %v", late.Output().SpillPath, late.SpillErr())
	}
	if exists(path) {
		t.Error("a late spill recreated the directory")
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("parent not empty: %v", ents)
	}
	if d.usedBytes() != 0 {
		t.Errorf("budget in use %d after Close", d.usedBytes())
	}
}

// A spill file removed behind conch's back is not named.
func TestVanishedSpillFileIsNotNamed(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := spilled(t, d, pattern(30))
	os.Remove(s.Output().SpillPath)
	if got := s.Output().SpillPath; got != "" {
		t.Errorf("SpillPath = %q for a vanished file", got)
	}
}

func TestUnwritableParentLosesOnlyTheSpill(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "missing")
	d := NewDir(parent, 1<<30)
	defer d.Close()
	s := NewStream(d, "stdout", 10, 1<<30)
	s.Write([]byte("0123456789abc"))
	s.Close()
	if out := s.Output(); out.Text != "3456789abc" || out.SpillPath != "" {
		t.Errorf("Output() = %+v", out)
	}
	if !errors.Is(s.SpillErr(), fs.ErrNotExist) {
		t.Errorf("SpillErr() = %v", s.SpillErr())
	}
}

// TestDefaultParentIsUserRoot: without a parent, the spill directory is
// made in the user's spill root, conch-<uid> in the temp dir (0700),
// which two servers share: Root names it, so that a session can be kept
// from seeing the other's.
func TestDefaultParentIsUserRoot(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, e := NewDir("", 1<<30), NewDir("", 1<<30)
	defer d.Close()
	defer e.Close()
	spilled(t, d, pattern(20))
	spilled(t, e, pattern(20))
	root := filepath.Join(os.TempDir(), "conch-"+strconv.Itoa(os.Geteuid()))
	if filepath.Dir(d.Path()) != root || filepath.Dir(e.Path()) != root || d.Path() == e.Path() {
		t.Errorf("Path() = %q and %q, want two directories in %q", d.Path(), e.Path(), root)
	}
	if d.Root() != root || e.Root() != root {
		t.Errorf("Root() = %q, %q; want %q", d.Root(), e.Root(), root)
	}
	if fi, err := os.Stat(root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, %v; want mode 0700", root, fi.Mode(), err)
	}
}

// TestUserRootPlanted: a user root that is not a directory of this user
// (here a symbolic link planted in its place) is not used: the spill
// directory goes straight to the temp dir, its own Root.
func TestUserRootPlanted(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	elsewhere := t.TempDir()
	if err := os.Symlink(elsewhere, UserRoot()); err != nil {
		t.Fatal(err)
	}
	d := NewDir("", 1<<30)
	defer d.Close()
	spilled(t, d, pattern(20))
	if filepath.Dir(d.Path()) != os.TempDir() || d.Root() != d.Path() {
		t.Errorf("Path() = %q, Root() = %q; want a directory of its own in %q", d.Path(), d.Root(), os.TempDir())
	}
}

// TestOwnerViewsShareTheBudget: each owner's files go to a 0700
// subdirectory of its own, stable per owner, and one budget covers them
// all (a newer file of one owner evicts an older one of another).
func TestOwnerViewsShareTheBudget(t *testing.T) {
	d := newTestDir(t, 150)
	a, b := d.For("session-a"), d.For("session-b")
	pa := spilled(t, a, pattern(100)).SpillPath()
	pb := spilled(t, b, pattern(100)).SpillPath()
	dirA, dirB := filepath.Dir(pa), filepath.Dir(pb)
	if dirA == dirB || filepath.Dir(dirA) != d.Path() || filepath.Dir(dirB) != d.Path() {
		t.Fatalf("spill files %s and %s: want separate subdirectories of %s", pa, pb, d.Path())
	}
	if a.Path() != dirA || d.For("session-a").Path() != dirA {
		t.Errorf("view paths %q, %q; want %q for the same owner", a.Path(), d.For("session-a").Path(), dirA)
	}
	if fi, err := os.Stat(dirA); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("subdirectory %s: %v, %v; want mode 0700", dirA, fi.Mode(), err)
	}
	if exists(pa) || !exists(pb) {
		t.Errorf("after b's spill: a's file exists %v, b's %v; want a's evicted under the shared budget", exists(pa), exists(pb))
	}
	if got := d.usedBytes(); got != 100 {
		t.Errorf("budget in use %d, want 100", got)
	}
}

// TestEnsureMakesTheOwnersDirectory: Ensure creates the directory before
// anything spills, refuses a symlink planted in the subdirectory's place,
// and fails once the Dir is closed.
func TestEnsureMakesTheOwnersDirectory(t *testing.T) {
	d := newTestDir(t, 1<<20)
	p, err := d.For("x").Ensure()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || filepath.Dir(p) != d.Path() {
		t.Fatalf("Ensure() = %s (%v); want a directory under %s", p, err, d.Path())
	}
	if again, err := d.For("x").Ensure(); again != p || err != nil {
		t.Errorf("second Ensure() = %q, %v; want %q", again, err, p)
	}
	planted := d.For("y")
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(d.Path(), filepath.Base(planted.sub))); err != nil {
		t.Fatal(err)
	}
	if got, err := planted.Ensure(); err == nil {
		t.Errorf("Ensure() over a planted symlink = %q, want an error", got)
	}
	d.Close()
	if _, err := d.For("x").Ensure(); !errors.Is(err, ErrDirClosed) {
		t.Errorf("Ensure() after Close: %v, want ErrDirClosed", err)
	}
}
