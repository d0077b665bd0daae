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
