//go:build linux

package mcpserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
)

// TestHTTPCancelledCallUnanswered: over streamable HTTP, a call the
// client cancels while it runs gets no response on its stream; its
// command dies and the session goes on.
func TestHTTPCancelledCallUnanswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	c := rawClient{t: t, hc: hs.Client(), url: hs.URL + "/mcp"}
	c.initialize()
	stream := make(chan string, 1)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, strings.NewReader(callBash(5, "sleep 1045")))
	c.headers(req)
	go func() {
		resp, err := c.hc.Do(req)
		if err != nil {
			stream <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		stream <- string(b)
	}()
	e.waitRunning(t, "sleep 1045")
	c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`)
	e.waitGone(t, "sleep 1045", 3*time.Second)
	select {
	case got := <-stream:
		if strings.Contains(got, `"id":5`) {
			t.Errorf("the cancelled call was answered: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's stream did not end")
	}
	if got := c.post(callBash(5, "echo reused")); !strings.Contains(got, `reused\n`) {
		t.Errorf("a call reusing the id: %s", got)
	}
}

// TestHTTPCancelGoClient: the Go SDK client's cancellation over HTTP
// kills the command, no answer reaches the client, and a later call works.
func TestHTTPCancelGoClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	rec := &recorder{Transport: &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hs.Client()}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil).Connect(t.Context(), rec, legacyMCP)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 1044")})
		done <- err
	}()
	e.waitRunning(t, "sleep 1044")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call: %v", err)
	}
	e.waitGone(t, "sleep 1044", 3*time.Second)
	time.Sleep(100 * time.Millisecond) // room for a response, were one sent
	if got, _ := call(t, cs, "bash", bash("echo after")); got != "after\n" {
		t.Errorf("a later call: %q", got)
	}
	for _, m := range rec.responses() {
		if strings.Contains(m, "tool call aborted") {
			t.Errorf("the server answered the cancelled call: %s", m)
		}
	}
}

// TestHTTPErrorsAreJSONRPC: what answers a POST is JSON-RPC, errors
// included: an unknown method gets -32601, and the transport's refusals
// (not JSON, a batch, a wrong content type, no token, an unknown session,
// a body too large) keep their HTTP status with a JSON-RPC error body.
func TestHTTPErrorsAreJSONRPC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	c := rawClient{t: t, hc: hs.Client(), url: hs.URL + "/mcp", token: testToken}
	c.initialize()
	if body := c.post(`{"jsonrpc":"2.0","id":9,"method":"no/such/method"}`); body != `{"jsonrpc":"2.0","id":9,"error":{"code":-32601,"message":"Method not found","data":"JSON RPC not handled: \"no/such/method\" unsupported"}}`+"\n" {
		t.Errorf("an unknown method: %s", body)
	}
	invalidID := func(id, reason string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"Invalid Request","data":"` + reason + `"}}` + "\n"
	}
	invalid := func(reason string) string { return invalidID("null", reason) }
	for _, tc := range []struct {
		name, body string
		edit       func(*http.Request)
		status     int
		want       string // the body; "…" ends a prefix
	}{
		{"not JSON", "not json", nil, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` + "\n"},
		{"batch", `[{"jsonrpc":"2.0","id":10,"method":"ping"}]`, nil, http.StatusBadRequest, invalid("JSON-RPC batching is not supported in 2025-06-18 and later (request version: 2025-11-25)")},
		{"not JSON-RPC", `{"id":11}`, nil, http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"malformed payload: …`},
		{"content type", `{"jsonrpc":"2.0","id":12,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, http.StatusUnsupportedMediaType, invalidID("12", "Content-Type must be 'application/json'")},
		{"no token", `{"jsonrpc":"2.0","id":13,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }, http.StatusUnauthorized, invalid("unauthorized")},
		{"unknown session", `{"jsonrpc":"2.0","id":14,"method":"ping"}`, func(r *http.Request) { r.Header.Set("Mcp-Session-Id", "nope") }, http.StatusNotFound, invalidID("14", "session not found")},
		{"too large", `{"jsonrpc":"2.0","id":15,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}}`, nil, http.StatusRequestEntityTooLarge, invalid("request body exceeds 4194304 bytes")},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, strings.NewReader(tc.body))
		c.headers(req)
		if tc.edit != nil {
			tc.edit(req)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		prefix, isPrefix := strings.CutSuffix(tc.want, "…")
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" ||
			(isPrefix && !strings.HasPrefix(string(b), prefix)) || (!isPrefix && string(b) != tc.want) {
			t.Errorf("%s: %s %s %q\nwant %d application/json %q", tc.name, resp.Status, resp.Header.Get("Content-Type"), b, tc.status, tc.want)
		}
	}
	if got := c.post(`{"jsonrpc":"2.0","id":16,"method":"ping"}`); !strings.Contains(got, `"id":16,"result":{}`) {
		t.Errorf("a ping after the errors: %s", got)
	}
}

// TestHTTPSlowClients: clients that send their headers or body too slowly
// are cut off at the timeouts; at most MaxConns connections are open at
// once, however many clients come, so the server's descriptors stay
// bounded; and a normal client is served once the slow ones are gone. It
// does not run in parallel: it counts this process's descriptors.
func TestHTTPSlowClients(t *testing.T) {
	const maxConns, slow = 8, 40
	e := newEnv(t, &mcpserver.Options{MaxConns: maxConns, HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	addr := ln.Addr().String()
	before := testutil.CountFDs(t)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 0 { // headers that never end
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr)
		} else { // a body that never comes
			fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr, testToken)
		}
	}
	// The server side: at most maxConns accepted connections, whatever
	// the moment (our own slow ends count too, hence the subtraction).
	peak := 0
	for range 10 {
		if n := testutil.CountFDs(t) - before - len(conns); n > peak {
			peak = n
		}
		time.Sleep(50 * time.Millisecond)
	}
	if peak > maxConns+2 {
		t.Errorf("%d descriptors more than before the %d slow clients (beyond their own), want at most %d", peak, slow, maxConns+2)
	}
	// Each slow client is cut off at a timeout: the server closes it.
	deadline := time.Now().Add(10 * time.Second)
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		b, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("slow client %d: still open after 10s: %v", i, err)
		}
		if i%2 == 1 && !strings.HasPrefix(string(b), "HTTP/1.1 408 ") {
			t.Errorf("slow body %d: %q, want 408", i, b)
		}
	}
	// A normal client is served.
	hc := &http.Client{Transport: bearer{testToken, http.DefaultTransport.(*http.Transport).Clone()}}
	defer hc.CloseIdleConnections()
	c := rawClient{t: t, hc: hc, url: "http://" + addr + "/mcp"}
	c.initialize()
	if got := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); !strings.Contains(got, `"result":{}`) {
		t.Errorf("a normal client after the slow ones: %s", got)
	}
}
