//go:build linux

package testutil

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update is the -update flag of every test binary that imports testutil:
// Golden rewrites its files instead of comparing with them.
var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Golden compares got with the file at path, byte for byte, and fails t
// with a diff when they differ. With -update it writes got to path
// (creating its directory) instead.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden: %v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, d)
	}
}
