//go:build linux

package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// BenchmarkHTTPCall measures one `echo` bash call over HTTP at each
// revision: at 2026-07-28 every request is a connection of its own
// (no session), at 2025-11-25 one session carries them all.
//
//	go test -run '^$' -bench HTTPCall -benchtime 200x ./mcpserver
func BenchmarkHTTPCall(b *testing.B) {
	for _, rev := range []string{rev2026, rev2025} {
		b.Run(rev, func(b *testing.B) {
			ex, err := local.New(&local.Options{SpillParent: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			rt := tasks.New(nil)
			srv := mcpserver.New(tools.New(ex, &tools.Options{Tasks: rt, Home: b.TempDir()}), &mcpserver.Options{Token: testToken})
			hs := httptest.NewServer(srv.HTTPHandler())
			defer func() {
				srv.Close()
				hs.Close()
				rt.Close()
				ex.Close()
			}()
			tr := &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{testToken, http.DefaultTransport}}}
			cs, err := newClient("bench", nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "bash", Arguments: bash("echo hi")}
			b.ResetTimer()
			for range b.N {
				if r, err := cs.CallTool(context.Background(), params); err != nil || r.IsError {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}
