//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// connectAsking opens an MCP session over HTTP whose first root is ws,
// its questions answered by u.
func (s *attackSetup) connectAsking(t *testing.T, srv *httpServe, ws string, u *escalationUser) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := newClient(serverOptions{roots: []*mcp.Root{{URI: "file://" + ws}}, client: &mcp.ClientOptions{ElicitationHandler: u.handle}})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: withToken(srv.fileToken())}, legacyMCP)
	if err != nil {
		t.Fatalf("connect over http: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestEscalationGrant: after the sandbox denied a write to a sibling of
// the workspace, the question offers that directory for the session; the
// user's "Allow writes to <dir> for this session" runs the command again
// inside the sandbox with the directory writable (not outside it), the
// session's later commands write there without a question, and another
// session of the same server still cannot, and is asked. Over HTTP, the
// server on its defaults, as root and as an unprivileged user.
func TestEscalationGrant(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			testEscalationGrant(t, nobody)
		})
	}
}

func testEscalationGrant(t *testing.T, nobody bool) {
	s := newAttackSetup(t, nobody)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
	sib := filepath.Join(filepath.Dir(s.home), "sib")
	if err := os.MkdirAll(sib, 0o755); err != nil {
		t.Fatal(err)
	}
	if nobody {
		chownTree(t, sib)
	}
	srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
	grant := "Allow writes to " + sib + " for this session"
	uB := &escalationUser{t: t, home: s.home, ws: s.wsB, wantRuns: -1, answers: []*mcp.ElicitResult{choose(grant), choose("Deny")}}
	b := s.connectAsking(t, srv, s.wsB, uB)

	command := "echo run >> runs; echo x > " + filepath.Join(sib, "a") + " && echo wrote"
	r := callTool(t, b, "bash", bash(command))
	if got, want := text(t, r), "wrote\n[ran again with writes to "+sib+" allowed for this session]"; got != want {
		t.Errorf("granted: %q, want %q", got, want)
	}
	var v struct{ Sandbox struct{ Mode string } }
	if raw, err := json.Marshal(r.StructuredContent); err != nil || json.Unmarshal(raw, &v) != nil || v.Sandbox.Mode != "workspace-write" {
		t.Errorf("granted: structured value %v, want the second run in the workspace-write sandbox", r.StructuredContent)
	}
	wantQ := "Run this command again outside the sandbox?\n\nReason: the sandbox denied a write to " + filepath.Join(sib, "a") +
		"\nDirectory: " + s.wsB + "\nCommand: " + command + rerunNote
	if q, c := uB.questions(), uB.offered(); len(q) != 1 || q[0] != wantQ || !slices.Equal(c[0], []string{"Allow once", grant, "Deny"}) {
		t.Errorf("questions %q with choices %q; want one: %q, with Allow once, %q and Deny", q, c, wantQ, grant)
	}
	if runs(t, s.wsB) != 2 {
		t.Errorf("granted: ran %d times, want 2", runs(t, s.wsB))
	}
	// The session's next command writes there, unasked; outside the
	// grant, the sandbox still holds.
	if got := text(t, callTool(t, b, "bash", bash("echo y > "+filepath.Join(sib, "b")+" && cat "+filepath.Join(sib, "b")))); got != "y\n" {
		t.Errorf("the session's next write in the granted directory: %q", got)
	}
	if got := text(t, callTool(t, b, "bash", bash("echo z > ~/outside"))); !strings.Contains(got, "[sandbox: write to "+filepath.Join(s.home, "outside")) ||
		!strings.HasSuffix(got, "\n"+declinedLine) {
		t.Errorf("a write outside the grant: %q, want it denied", got)
	}
	if n := len(uB.questions()); n != 2 {
		t.Errorf("session B was asked %d times, want 2 (the first write, and the one outside the grant)", n)
	}

	// Another session of the server: still denied, and asked.
	uA := &escalationUser{t: t, home: s.home, ws: s.wsA, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Deny")}}
	a := s.connectAsking(t, srv, s.wsA, uA)
	got := text(t, callTool(t, a, "bash", bash("echo run >> runs; echo w > "+filepath.Join(sib, "c"))))
	if !strings.Contains(got, "[sandbox: write to "+filepath.Join(sib, "c")) || !strings.HasSuffix(got, "\n"+declinedLine) {
		t.Errorf("another session's write in B's granted directory: %q, want it denied, asked and declined", got)
	}
	if _, err := os.Stat(filepath.Join(sib, "c")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another session wrote in B's granted directory: %v", err)
	}
}
