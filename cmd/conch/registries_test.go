//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestRegistriesThroughPublic: the package registries this machine
// reaches are real destinations of the internet, and the default network
// policy lets their tools through: the Go module proxy and checksum
// database (go mod download) and the npm registry (npm install), each
// with a cache of the test's own so that nothing is served locally. It
// reports how long go mod download took through public and with the
// network on (docs: the README's figures).
func TestRegistriesThroughPublic(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the network policy needs a TUN device this user may open")
	}
	if testing.Short() {
		t.Skip("reaches the package registries")
	}
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	testutil.ConchBinary(t) // built before the clock starts
	times := map[string]time.Duration{}
	for _, network := range []string{"public", "on"} {
		ws := t.TempDir()
		start := time.Now()
		out, errOut, code := testutil.RunConch(t, marker, "run", "--cwd", ws, "--network", network, "--timeout-ms", "300000", "--",
			"export GOMODCACHE=$PWD/mod GOPATH=$PWD/gopath GOFLAGS=-modcacherw; go mod download -json golang.org/x/sync@v0.20.0 >/dev/null && ls $GOMODCACHE/golang.org/x/")
		times[network] = time.Since(start)
		if code != 0 || !strings.Contains(out, "sync@v0.20.0") {
			t.Fatalf("go mod download through %s: %d\n%s\n%s", network, code, out, errOut)
		}
	}
	t.Logf("conch run -- go mod download golang.org/x/sync@v0.20.0 (fresh module cache): public %v, on %v (%.2f×)", times["public"], times["on"], float64(times["public"])/float64(times["on"]))
	ws := t.TempDir()
	out, errOut, code := testutil.RunConch(t, marker, "run", "--cwd", ws, "--timeout-ms", "300000", "--",
		"npm install --no-audit --no-fund --cache $PWD/npm-cache is-number@7.0.0 >/dev/null && node -e 'console.log(require(\"is-number\")(5))'")
	if code != 0 || out != "true\n" {
		t.Fatalf("npm install through public: %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules", "is-number")); err != nil {
		t.Errorf("npm install: %v", err)
	}
}
