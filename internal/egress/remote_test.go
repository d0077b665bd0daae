//go:build linux

package egress_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestRemoteHost: on a remote host (Debian's sshd on the lab's loopback,
// conch agent run there as another user), the agent enforces the host's
// network policy, which travels with the host's settings: the deny
// pattern and the public mode's refusals hold there, named in the
// result; the internet is reached by name.
func TestRemoteHost(t *testing.T) {
	guard(t)
	srv := sshdtest.Start(t)
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	sshdtest.NewClient(filepath.Join(home, ".ssh")).Alias(t, "box", srv, 0)
	name := uniqueName(t, "remote")
	netlab.SetHost(t, name, netlab.Public[0])
	netlab.SetHost(t, "blocked."+name, netlab.Public[0])
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[hosts.box]\nssh = \"box\"\ncwd = \"/tmp\"\nnetwork = \"public\"\n\n[sandbox.network]\ndeny = [\"blocked."+name+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := testutil.Marker(t)
	cmd := exec.Command(testutil.ConchBinary(t), "serve", "--config", cfg)
	cmd.Env = append(testutil.Env(marker), "HOME="+home, "SSH_AUTH_SOCK=", "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	logs := new(testutil.Buffer)
	cmd.Stderr = logs
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "egress-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyMCP)
	if err != nil {
		t.Fatalf("connect to conch serve: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		cs.Close()
		testutil.AssertNoProcesses(t, marker)
		srv.AssertNoAgents(t)
	})
	line := curl(name, 80) + "; echo; " + curl("blocked."+name, 80) + "; " + curl("169.254.169.254", 80) + "; echo done"
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": line, "description": "fetch", "host": "box"}})
	if err != nil {
		t.Fatalf("call: %v\n%s", err, logs.String())
	}
	got := r.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{
		"hello from 203.0.113.10\n",
		"[sandbox: network access to blocked." + name + ":80 denied (denied by blocked." + name + ")]\n",
		"[sandbox: network access to 169.254.169.254:80 denied (the cloud metadata address)]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("on the remote host: %q\nlacks %q\n%s", got, want, logs.String())
		}
	}
}

// legacyMCP pins a Go SDK client to MCP 2025-11-25, the revision with
// sessions this test was written for: the SDK offers 2026-07-28 first,
// which conch serves too (docs/transports.md#protocol-revisions).
var legacyMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
