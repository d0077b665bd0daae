//go:build linux

package mcpserver

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzLineFilter: whatever the input, the SDK's stdio connection reads
// what the line filter passes without failing (a failure ends the
// session), up to a last request that must come through.
func FuzzLineFilter(f *testing.F) {
	for _, s := range []string{
		"not json",
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		` {"jsonrpc":"2.0","method":"x"}` + " \t\r",
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} {}`,
		"\r\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		const last = `{"jsonrpc":"2.0","id":"last","method":"ping"}`
		in := newLineFilter(strings.NewReader(input+"\n"+last+"\n"), io.Discard)
		tr := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{io.Discard}, MaxLineLength: -1}
		conn, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for {
			m, err := conn.Read(context.Background())
			if err != nil {
				t.Fatalf("the SDK failed on a line the filter passed: %v", err)
			}
			if req, ok := m.(*jsonrpc.Request); ok && req.ID.Raw() == "last" && req.Method == "ping" {
				return
			}
		}
	})
}
