//go:build linux

package testutil_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestNPMFixture installs a fixture whose one dependency is a local
// folder (no registry needed) from several goroutines at once, finds it
// installed without npm afterwards, and reinstalls it once its
// package-lock.json changes.
func TestNPMFixture(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatalf("npm is needed for the npm fixtures of conch's tests: %v", err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"dep/package.json": `{"name":"dep","version":"1.0.0"}`,
		"package.json":     `{"name":"fixture","private":true,"dependencies":{"dep":"file:./dep"}}`,
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lock := exec.Command("npm", "install", "--package-lock-only", "--no-audit", "--no-fund", "--loglevel=error")
	lock.Dir = dir
	if out, err := lock.CombinedOutput(); err != nil {
		t.Fatalf("npm install --package-lock-only: %v\n%s", err, out)
	}
	modules := filepath.Join(dir, "node_modules")

	// Parallel test binaries: one installs, the others wait and find it
	// done (flock locks conflict between open files of one process too).
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			var got string
			got, errs[i] = testutil.NPMFixture(dir)
			if errs[i] == nil && got != modules {
				t.Errorf("NPMFixture = %s, want %s", got, modules)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(modules, "dep", "package.json")); err != nil {
		t.Fatalf("not installed: %v", err)
	}

	// Installed: npm is not needed again.
	sentinel := filepath.Join(modules, "sentinel")
	os.WriteFile(sentinel, nil, 0o644)
	path := os.Getenv("PATH")
	t.Setenv("PATH", "/nonexistent")
	if _, err := testutil.NPMFixture(dir); err != nil {
		t.Fatalf("an installed fixture needed npm: %v", err)
	}
	// Stale: reinstalled, and without npm that fails, saying what it needs.
	f, _ := os.OpenFile(filepath.Join(dir, "package-lock.json"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\n")
	f.Close()
	if _, err := testutil.NPMFixture(dir); err == nil || !strings.Contains(err.Error(), "installing it needs Node.js 20 or later and npm") {
		t.Errorf("stale fixture without npm: %v", err)
	}
	t.Setenv("PATH", path)
	if _, err := testutil.NPMFixture(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sentinel); err == nil {
		t.Error("a stale fixture was not reinstalled")
	}
}
