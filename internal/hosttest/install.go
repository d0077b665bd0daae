//go:build linux

package hosttest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// A host version the tests run, as an npm fixture in testdata/npm/<name>:
// a package.json that pins it (with allowScripts for the install scripts
// that fetch native binaries: npm 11 runs no other) and its
// package-lock.json.
const (
	Claude197 = "claude-code-2.1.197" // runs on Node.js 20
	Claude332 = "claude-code-2.1.332" // declares Node.js 22, which its fixture installs (npm package node)
	Codex171  = "codex-0.171.0"
)

// CacheEnv names a directory for the installed hosts, instead of
// $XDG_CACHE_HOME/conch-tests/npm (~/.cache/…). CI keeps it between runs.
const CacheEnv = "CONCH_TEST_NPM_CACHE"

// fixtures is where this package's fixtures are, found from this file.
func fixtures() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "npm")
}

var installs sync.Map // name → *install

type install struct {
	once    sync.Once
	modules string
	err     error
}

// Install makes sure host (Claude197, Claude332, Codex171) is installed
// and returns its node_modules. Each version is installed once per
// machine, into a directory of the cache named by the fixture's lock (a
// new pin installs anew), with `npm ci` under an exclusive lock
// (testutil.NPMFixture), so that test binaries running at once install it
// once; later runs find it there. The first install needs npm and the
// registry; a failure fails t.
func Install(t testing.TB, host string) string {
	t.Helper()
	v, _ := installs.LoadOrStore(host, &install{})
	in := v.(*install)
	in.once.Do(func() { in.modules, in.err = installHost(host) })
	if in.err != nil {
		t.Fatalf("install %s: %v", host, in.err)
	}
	return in.modules
}

func installHost(host string) (string, error) {
	src := filepath.Join(fixtures(), host)
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append(pkg, 0), lock...))
	cache := os.Getenv(CacheEnv)
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory (set %s): %w", CacheEnv, err)
		}
		cache = filepath.Join(base, "conch-tests", "npm")
	}
	dir := filepath.Join(cache, host+"-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Its own package.json: npm installs into the nearest directory that
	// has one.
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := writeAtomic(filepath.Join(dir, name), data); err != nil {
			return "", err
		}
	}
	return testutil.NPMFixture(dir)
}

// writeAtomic writes data to path through a temporary file and a rename,
// so that a concurrent reader sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// EnableEnv is the variable that turns the host tests on: they install
// the hosts from npm (about 1.2 GB, once per machine) and run them for a
// few minutes, so `go test ./...` runs them only when asked. .ci/run
// sets it.
const EnableEnv = "CONCH_HOST_TESTS"

// Require skips t unless EnableEnv is "1".
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(EnableEnv) != "1" {
		t.Skipf("set %s=1 to drive the real hosts (.ci/run does); they install from npm on first use", EnableEnv)
	}
}
