//go:build linux

package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
)

// TestHTTPSlowlorisMakesRoom: with every place of Serve taken by clients
// that send their headers a byte at a time, or send nothing (and connect
// again when cut), a legitimate client is answered within seconds, not
// after the 10 s header timeout: a client that sent part of its headers,
// or nothing for half a second, is cut for it. A connection whose
// request is in a handler (an open event stream) is never cut.
func TestHTTPSlowlorisMakesRoom(t *testing.T) {
	t.Parallel()
	const maxConns, slow = 8, 24
	e := newEnv(t, &mcpserver.Options{MaxConns: maxConns})
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
	hc := &http.Client{Transport: bearer{testToken, http.DefaultTransport.(*http.Transport).Clone()}}
	defer hc.CloseIdleConnections()
	a := rawClient{t: t, hc: hc, url: "http://" + addr + "/mcp"}
	a.initialize()

	// A's event stream: a request that stays in its handler.
	streamCtx, closeStream := context.WithCancel(t.Context())
	defer closeStream()
	req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, a.url, nil)
	a.headers(req)
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %v %v", resp, err)
	}
	streamEnded := make(chan struct{})
	go func() {
		defer close(streamEnded)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()

	attack, endAttack := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer endAttack()
	var connected, cuts atomic.Int64
	for i := range slow {
		wg.Go(func() {
			for attack.Err() == nil {
				if dribble(attack, addr, i%3 == 0, &connected) {
					cuts.Add(1)
				}
			}
		})
	}
	// Every slow client has connected (three times as many as the
	// places): the server is full.
	testutil.WaitFor(t, 20*time.Second, "the slow clients to connect", func() bool { return connected.Load() >= slow })
	for i := range 5 {
		b := rawClient{t: t, hc: &http.Client{Timeout: 5 * time.Second}, url: a.url, token: testToken}
		start := time.Now()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
		req.Close = true
		b.headers(req)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Errorf("legitimate client %d during the attack: %v", i, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("legitimate client %d: %s", i, resp.Status)
		}
		t.Logf("legitimate client %d answered in %v", i, time.Since(start).Round(time.Millisecond))
	}
	select {
	case <-streamEnded:
		t.Error("the event stream, a request in its handler, was cut")
	default:
	}
	if got := a.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); !strings.Contains(got, `"result":{}`) {
		t.Errorf("A after the attack: %s", got)
	}
	if cuts.Load() == 0 {
		t.Error("no slow client was cut")
	}
}

// dribble connects to addr (counting it in connected), sends a request
// line and then a header byte every 100 ms (nothing at all when silent)
// until the server cuts it (true) or ctx ends (false).
func dribble(ctx context.Context, addr string, silent bool, connected *atomic.Int64) (cut bool) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	connected.Add(1)
	defer context.AfterFunc(ctx, func() { c.Close() })()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		io.Copy(io.Discard, c)
	}()
	defer func() { c.Close(); <-closed }()
	if !silent {
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Pad: ", addr)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-closed:
			return ctx.Err() == nil
		case <-tick.C:
			if !silent {
				c.Write([]byte("a"))
			}
		}
	}
}
