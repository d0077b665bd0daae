//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// The protocol revisions the Go SDK client offers in these tests.
const (
	rev2026 = "2026-07-28"
	rev2025 = "2025-11-25"
)

// TestServeBothRevisions: the built binary serves a Go SDK client at
// 2026-07-28 (server/discover, no initialize) and one at 2025-11-25,
// on stdio and, both at once on one server, over HTTP.
func TestServeBothRevisions(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	check := func(t *testing.T, cs *mcp.ClientSession, rev, owner string) {
		t.Helper()
		if got := cs.InitializeResult().ProtocolVersion; got != rev {
			t.Errorf("negotiated %s, want %s", got, rev)
		}
		lt, err := cs.ListTools(t.Context(), nil)
		if err != nil || len(lt.Tools) == 0 || lt.Tools[0].Name != "bash" {
			t.Errorf("tools/list: %v, %v", lt, err)
		}
		r := callTool(t, cs, "bash", bash("echo $CONCH_SESSION_ID"))
		if got := text(t, r); got != owner+"\n" || r.IsError {
			t.Errorf("bash at %s: %q, want %s", rev, got, owner)
		}
	}
	for _, rev := range []string{rev2026, rev2025} {
		t.Run("stdio/"+rev, func(t *testing.T) {
			cmd := testutil.Conch(t, marker, "serve")
			cmd.Env = append(cmd.Env, "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
			cmd.Stderr = newLogBuffer(t, "conch serve")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			check(t, cs, rev, "stdio")
		})
	}
	t.Run("http", func(t *testing.T) {
		srv := startHTTPServe(t, marker, "127.0.0.1:0")
		defer srv.stop()
		dial := func(rev string) *mcp.ClientSession {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: withToken(srv.fileToken())},
				&mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				t.Fatalf("connect at %s: %v", rev, err)
			}
			return cs
		}
		modern, old := dial(rev2026), dial(rev2025)
		check(t, modern, rev2026, "http")
		check(t, old, rev2025, "http-1")
		modern.Close()
		old.Close()
	})
}

// TestEscalationStateless: at 2026-07-28 the question after a denial goes
// out as input_required, and the retry with the answer does not run the
// sandboxed first run again: one run before the question, one more after
// a yes, none after a no. As root and as an unprivileged user.
func TestEscalationStateless(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			marker := testutil.Marker(t)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
			outside := func(home string) string { return filepath.Join(home, "outside") }

			home, ws := sandboxDirs(t, nobody)
			u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Allow once")}}
			cs := startSandboxedRev(t, rev2026, marker, nobody, home, ws, u)
			if got := cs.InitializeResult().ProtocolVersion; got != rev2026 {
				t.Fatalf("negotiated %s", got)
			}
			got := text(t, callTool(t, cs, "bash", bash(escalationCommand)))
			if !strings.HasSuffix(got, ranAgainLine) {
				t.Errorf("approved: %q, want the second run's result", got)
			}
			if n := runs(t, ws); n != 2 {
				t.Errorf("approved: ran %d times, want 2", n)
			}
			if b, err := os.ReadFile(outside(home)); err != nil || string(b) != "x\n" {
				t.Errorf("approved: ~/outside %q, %v", b, err)
			}
			if q := u.questions(); len(q) != 1 || !strings.HasPrefix(q[0], "Run this command again outside the sandbox?") {
				t.Errorf("questions %q", q)
			}

			home, ws = sandboxDirs(t, nobody)
			u = &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{{Action: "decline"}}}
			cs = startSandboxedRev(t, rev2026, marker, nobody, home, ws, u)
			got = text(t, callTool(t, cs, "bash", bash(escalationCommand)))
			if !strings.HasSuffix(got, "]\n[exit code: 3]\n"+declinedLine) {
				t.Errorf("declined: %q", got)
			}
			if _, err := os.Stat(outside(home)); !errors.Is(err, os.ErrNotExist) || runs(t, ws) != 1 {
				t.Errorf("declined: ~/outside %v, ran %d times; want no file, one run", err, runs(t, ws))
			}
		})
	}
}

// TestNamedClientsConfig: [[mcp.clients]] in the configuration file gives
// conch serve --http two clients with their own tokens; at 2026-07-28
// each is the owner of its tasks and sees only them; conch config serve
// names them and never shows a token.
func TestNamedClientsConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	const aliceToken, bobToken = "alice-token-0123456789", "bob-token-0123456789ab"
	cfgHome := t.TempDir()
	aliceDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfgHome, "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgHome, "conch", "config.toml")
	body := "[[mcp.clients]]\nname = \"alice\"\ntoken = \"" + aliceToken + "\"\ncwd = \"" + aliceDir + "\"\n\n" +
		"[[mcp.clients]]\nname = \"bob\"\ntoken = \"" + bobToken + "\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	out, stderr, code := testutil.RunConch(t, marker, "config", "serve", "--config", cfg)
	if code != 0 {
		t.Fatalf("conch config: %d %s", code, stderr)
	}
	want := "mcp.clients = {name = \"alice\", token = (set), cwd = \"" + aliceDir + "\"}  # " + cfg + ":2\n" +
		"mcp.clients = {name = \"bob\", token = (set)}  # " + cfg + ":7\n"
	if !strings.Contains(out, want) || strings.Contains(out, aliceToken) || strings.Contains(out, bobToken) {
		t.Errorf("conch config:\n%s\nwant the lines\n%s(and no token)", out, want)
	}

	srv := startHTTPServe(t, marker, "127.0.0.1:0", "XDG_CONFIG_HOME="+cfgHome)
	defer srv.stop()
	dial := func(token string) *mcp.ClientSession {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: withToken(token)},
			&mcp.ClientSessionOptions{ProtocolVersion: rev2026})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice, bob := dial(aliceToken), dial(bobToken)
	if got := text(t, callTool(t, alice, "bash", bash("echo $CONCH_SESSION_ID; pwd"))); got != "alice\n"+aliceDir+"\n" {
		t.Errorf("alice: %q", got)
	}
	if got := text(t, callTool(t, bob, "bash", bash("echo $CONCH_SESSION_ID"))); got != "bob\n" {
		t.Errorf("bob: %q", got)
	}
	bg := bash("sleep 71")
	bg["run_in_background"] = true
	callTool(t, alice, "bash", bg)
	if got := text(t, callTool(t, bob, "task_list", map[string]any{})); strings.Contains(got, "sleep 71") {
		t.Errorf("bob sees alice's task: %q", got)
	}
	if got := text(t, callTool(t, alice, "task_list", map[string]any{})); !strings.Contains(got, "sleep 71") {
		t.Errorf("alice misses her task: %q", got)
	}
	// A client's reconnect (a new connection, the same token) finds it.
	if got := text(t, callTool(t, dial(aliceToken), "task_list", map[string]any{})); !strings.Contains(got, "sleep 71") {
		t.Errorf("alice, reconnected, misses her task: %q", got)
	}
}

// TestNamedClientsConfigErrors: a bad [[mcp.clients]] element stops conch
// with the file, the line and the key named, and never echoes a token.
func TestNamedClientsConfigErrors(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	const tok = "a-token-0123456789abcdef"
	for _, c := range []struct{ body, want string }{
		{"[[mcp.clients]]\nname = \"a\"\n", ":2: mcp.clients: client a needs a token"},
		{"[[mcp.clients]]\ntoken = \"" + tok + "\"\n", ": mcp.clients: a client needs a name"},
		{"[[mcp.clients]]\nname = \"http\"\ntoken = \"" + tok + "\"\n", ":2: mcp.clients.1.name: \"http\" is not a client name"},
		{"[[mcp.clients]]\nname = \"http-2\"\ntoken = \"" + tok + "\"\n", ":2: mcp.clients.1.name: \"http-2\" is not a client name"},
		{"[[mcp.clients]]\nname = \"" + strings.Repeat("a", 65) + "\"\ntoken = \"" + tok + "\"\n", ":2: mcp.clients.1.name: \"" + strings.Repeat("a", 65) + "\" is not a client name"},
		{"[[mcp.clients]]\nname = \"-a\"\ntoken = \"" + tok + "\"\n", ":2: mcp.clients.1.name: \"-a\" is not a client name"},
		// At most 64 characters: the longest name is taken (the error is the next check's).
		{"[[mcp.clients]]\nname = \"" + strings.Repeat("a", 64) + "\"\n", ":2: mcp.clients: client " + strings.Repeat("a", 64) + " needs a token"},
		{"[[mcp.clients]]\nname = \"a\"\ntoken = \"short\"\n", ":3: mcp.clients.1.token: a client token must have at least 16 characters"},
		{"[[mcp.clients]]\nname = \"a\"\ntoken = \"" + tok + "\"\n[[mcp.clients]]\nname = \"a\"\ntoken = \"" + tok + "x\"\n", ":5: mcp.clients.2.name: client a is already configured at "},
		{"[[mcp.clients]]\nname = \"a\"\ntoken = \"" + tok + "\"\n[[mcp.clients]]\nname = \"b\"\ntoken = \"" + tok + "\"\n", "mcp.clients: client b has the token of client a"},
		{"[[mcp.clients]]\nname = \"a\"\nsecret = \"x\"\n", ":3: mcp.clients.1.secret: unknown key (a client takes name, token, cwd)"},
		{"[[hosts]]\nssh = \"x\"\n", ":1: hosts: arrays of tables are not supported"},
	} {
		cfg := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(cfg, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := testutil.RunConch(t, marker, "config", "serve", "--config", cfg)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, tok) {
			t.Errorf("%q: exit %d, %q; want 2 and %q, no token", c.body, code, stderr, c.want)
		}
	}
}
