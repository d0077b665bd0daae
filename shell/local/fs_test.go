//go:build linux

package local_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/shell"
)

// The local executor answers for this machine's file system: the real
// path of a directory, why another path is none, and the user's home.
func TestFileSystem(t *testing.T) {
	ex, _ := newExec(t, nil)
	dir := t.TempDir()
	real, _ := filepath.EvalSymlinks(dir)
	link := filepath.Join(t.TempDir(), "link")
	file := filepath.Join(dir, "f")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ex.Dir(link); err != nil || got != real {
		t.Errorf("Dir(link) = %q, %v; want %q", got, err, real)
	}
	if _, err := ex.Dir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Dir(missing) = %v, want ErrNotExist", err)
	}
	if _, err := ex.Dir(file); !errors.Is(err, shell.ErrNotDir) || err.Error() != "stat "+file+": not a directory" {
		t.Errorf("Dir(file) = %v, want ErrNotDir", err)
	}
	want, _ := os.UserHomeDir()
	if got, err := ex.Home(); err != nil || got != want {
		t.Errorf("Home() = %q, %v; want %q", got, err, want)
	}
}
