//go:build linux

package mcpserver_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestRootsChange: the session's cwd follows the client's roots when it
// says they changed; a first file root that is not a directory falls back
// to the executor's default.
func TestRootsChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
	c.AddRoots(&mcp.Root{URI: "file://" + a})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: hs.Client()}, legacyMCP)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got, _ := call(t, cs, "bash", bash("pwd")); got != a+"\n" {
		t.Fatalf("pwd: %q, want %q", got, a)
	}
	c.RemoveRoots("file://" + a)
	c.AddRoots(&mcp.Root{URI: "file://" + b})
	testutil.WaitFor(t, 5*time.Second, "the cwd to follow the roots", func() bool {
		got, _ := call(t, cs, "bash", bash("pwd"))
		return got == b+"\n"
	})
	c.RemoveRoots("file://" + b)
	c.AddRoots(&mcp.Root{URI: "file://" + filepath.Join(base, "missing")})
	wd, _ := os.Getwd()
	testutil.WaitFor(t, 5*time.Second, "the cwd to fall back to the default", func() bool {
		got, _ := call(t, cs, "bash", bash("pwd -P"))
		return got == wd+"\n"
	})
}
