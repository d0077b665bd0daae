//go:build linux

package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/mcpserver"
)

// stdio runs ServeStdio over pipes and connects a client to it.
type stdio struct {
	cs       *mcp.ClientSession
	toServer *io.PipeWriter // the client's output: closing it is stdin EOF
	served   chan error
}

func serveStdio(t *testing.T, e *env, ctx context.Context) *stdio {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	s := &stdio{toServer: cw, served: make(chan error, 1)}
	go func() {
		s.served <- e.srv.ServeStdio(ctx, sr, sw)
		sw.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw}, legacyMCP)
	if err != nil {
		t.Fatal(err)
	}
	s.cs = cs
	t.Cleanup(func() {
		cs.Close()
		<-s.served
	})
	return s
}

// TestStdioEOF: the end of the input ends the session at once: the call
// in flight is cancelled and the background tasks are killed.
func TestStdioEOF(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s := serveStdio(t, e, context.Background())
	if got, _ := call(t, s.cs, "bash", bash("echo $CONCH_SESSION_ID")); got != "stdio\n" {
		t.Errorf("session id: %q", got)
	}
	call(t, s.cs, "bash", bashBG("sleep 1015"))
	go s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 1016")})
	e.waitRunning(t, "sleep 1015")
	e.waitRunning(t, "sleep 1016")
	start := time.Now()
	s.toServer.Close()
	select {
	case err := <-s.served:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		s.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after EOF")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ServeStdio returned %v after EOF", d)
	}
	if left := e.processes("sleep 101"); len(left) > 0 {
		t.Errorf("survivors: %q", left)
	}
}

// TestStdioContext: ServeStdio returns nil when its ctx is done, with its
// session ended; concurrent stdio sessions have their own ids.
func TestStdioContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	s1 := serveStdio(t, e, ctx)
	s2 := serveStdio(t, e, context.Background())
	id1, _ := call(t, s1.cs, "bash", bash("echo $CONCH_SESSION_ID"))
	id2, _ := call(t, s2.cs, "bash", bash("echo $CONCH_SESSION_ID"))
	if id1 == id2 || (id1 != "stdio\n" && id2 != "stdio\n") {
		t.Errorf("session ids %q and %q", id1, id2)
	}
	call(t, s1.cs, "bash", bashBG("sleep 1017"))
	e.waitRunning(t, "sleep 1017")
	cancel()
	select {
	case err := <-s1.served:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		s1.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after its ctx ended")
	}
	e.waitGone(t, "sleep 1017", time.Second)
	if got, _ := call(t, s2.cs, "task_list", nil); got != "(no background tasks)" {
		t.Errorf("the other session: %q", got)
	}
	e.srv.Close()
	select {
	case err := <-s2.served:
		s2.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return after Close")
	}
	if err := e.srv.ServeStdio(context.Background(), eofReader{}, io.Discard); !errors.Is(err, mcpserver.ErrClosed) {
		t.Errorf("ServeStdio after Close: %v", err)
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// rawStdio speaks newline-delimited JSON-RPC to ServeStdio by hand, to
// send what the go-sdk client never would.
type rawStdio struct {
	t      *testing.T
	in     *io.PipeWriter // the server's stdin
	lines  chan string    // what the server wrote, line by line
	served chan error
}

func serveRawStdio(t *testing.T, e *env) *rawStdio {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	c := &rawStdio{t: t, in: cw, lines: make(chan string, 100), served: make(chan error, 1)}
	go func() {
		c.served <- e.srv.ServeStdio(context.Background(), sr, sw)
		sw.Close()
	}()
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(cr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		io.Copy(io.Discard, cr)
	}()
	t.Cleanup(func() {
		cw.Close()
		if err := <-c.served; err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
		for range c.lines {
		}
	})
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if got := c.recv(); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rawStdio) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv returns the server's next line; it fails the test after 10 s.
func (c *rawStdio) recv() string {
	c.t.Helper()
	return c.recvWithin(10 * time.Second)
}

// recvWithin is recv with another limit.
func (c *rawStdio) recvWithin(d time.Duration) string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the server closed its output")
		}
		return l
	case <-time.After(d):
		c.t.Fatalf("no message from the server within %v", d)
	}
	return ""
}

// callBash is the tools/call request of a bash command.
func callBash(id int, command string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"bash","arguments":{"command":` + strconv.Quote(command) + `,"description":"x"}}}`
}

// TestStdioBadInput: a line that is not a JSON-RPC message gets an error
// response with a null id, and the session goes on: a call in flight
// finishes and a later request is answered.
func TestStdioBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := serveRawStdio(t, e)
	c.send(callBash(1, "sleep 1; echo survived"))
	e.waitRunning(t, "sleep 1; echo survived")
	const (
		parseError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
		notJSONRPC = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"not a JSON-RPC 2.0 message"}}`
		batch      = `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"batches are not supported"}}`
	)
	for i, bad := range []struct{ line, want string }{
		{"not json", parseError},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"`, parseError},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"} {}`, parseError},
		{`{"id":5,"method":"ping"}`, notJSONRPC},
		{`{"jsonrpc":"1.0","id":5,"method":"ping"}`, notJSONRPC},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, notJSONRPC},
		{`{"jsonrpc":"2.0"}`, notJSONRPC},
		{`42`, notJSONRPC},
		{`"ping"`, notJSONRPC},
		{`null`, notJSONRPC},
		{`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, batch},
		{`[]`, batch},
		{" \t", ""}, // a blank line is skipped
		{` {"jsonrpc":"2.0","id":6,"method":"ping"}` + " \t\r", `{"jsonrpc":"2.0","id":6,"result":{}}`},
	} {
		c.send(bad.line)
		if bad.want != "" {
			if got := c.recv(); got != bad.want {
				t.Errorf("%q: got %s, want %s", bad.line, got, bad.want)
			}
		}
		id := 100 + i
		c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"ping"}`)
		if got, want := c.recv(), `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"result":{}}`; got != want {
			t.Fatalf("ping after %q: %s, want %s", bad.line, got, want)
		}
	}
	if got := c.recv(); !strings.Contains(got, `"id":1,`) || !strings.Contains(got, `survived\n`) {
		t.Errorf("the call in flight: %s", got)
	}
	c.send(callBash(2, "echo still serving"))
	if got := c.recv(); !strings.Contains(got, `"id":2,`) || !strings.Contains(got, `still serving\n`) {
		t.Errorf("a call after the bad lines: %s", got)
	}
}

// TestStdioLongLine: a line over 16 MiB is refused with an error response
// and discarded as it streams in (not held in memory), and the session
// goes on. It runs alone, so that the allocations it measures are the
// server's.
func TestStdioLongLine(t *testing.T) {
	e := newEnv(t, nil)
	c := serveRawStdio(t, e)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	const lineMiB = 128
	for range lineMiB {
		if _, err := c.in.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	c.send("")
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"message longer than 16777216 bytes"}}`
	// Minutes, not seconds, for the long lines: they are slow under the
	// race detector on a loaded machine.
	if got := c.recvWithin(2 * time.Minute); got != want {
		t.Errorf("a %d MiB line: %s, want %s", lineMiB, got, want)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Up to 16 MiB is buffered before the line is known to be too long
	// (about 32 MiB allocated as the buffer doubles); holding the line
	// would take all 128.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > lineMiB/2<<20 {
		t.Errorf("reading a %d MiB line allocated %d MiB", lineMiB, alloc>>20)
	}
	// Exactly the limit is still a message.
	pad := 16<<20 - len(`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"pad":""}}}`)
	c.send(`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("p", pad) + `"}}}`)
	if got := c.recvWithin(2 * time.Minute); got != `{"jsonrpc":"2.0","id":7,"result":{}}` {
		t.Errorf("a 16 MiB message: %.200s", got)
	}
	c.send(callBash(8, "echo after the long line"))
	if got := c.recv(); !strings.Contains(got, `after the long line\n`) {
		t.Errorf("a call after the long line: %s", got)
	}
}

// TestStdioCancelledCallUnanswered: a call the client cancels while it
// runs gets no response (the protocol says so; the TypeScript client
// reports one as a response to an unknown id); its process group is
// killed, and the session, and the id, go on.
func TestStdioCancelledCallUnanswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := serveRawStdio(t, e)
	c.send(callBash(1, "sleep 1041 & sleep 1042"))
	e.waitRunning(t, "sleep 1041")
	e.waitRunning(t, "sleep 1042")
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}}`)
	e.waitGone(t, "sleep 104", 3*time.Second)
	time.Sleep(100 * time.Millisecond) // room for a response, were one sent
	c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := c.recv(); got != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("after the cancelled call: %s, want only the ping's answer", got)
	}
	// The id is free again, even while the cancelled call still ends (on
	// a loaded machine, long after its process group is gone), and a
	// cancellation of a finished call is ignored.
	c.send(callBash(1, "echo reused"))
	if got := c.recv(); !strings.Contains(got, `"id":1,`) || !strings.Contains(got, `reused\n`) {
		t.Errorf("a call reusing the id: %s", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	c.send(callBash(3, "echo three"))
	if got := c.recv(); !strings.Contains(got, `"id":3,`) || !strings.Contains(got, `three\n`) {
		t.Errorf("a call after a late cancellation: %s", got)
	}
}

// TestStdioCancelGoClient: the Go SDK client's cancellation kills the
// command, the server sends nothing for the call, and a later call works.
func TestStdioCancelGoClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- e.srv.ServeStdio(context.Background(), sr, sw)
		sw.Close()
	}()
	rec := &recorder{Transport: &mcp.IOTransport{Reader: cr, Writer: cw}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil).Connect(t.Context(), rec, legacyMCP)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cs.Close()
		<-served
	}()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 1043")})
		done <- err
	}()
	e.waitRunning(t, "sleep 1043")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call: %v", err)
	}
	e.waitGone(t, "sleep 1043", 3*time.Second)
	if got, _ := call(t, cs, "bash", bash("echo after")); got != "after\n" {
		t.Errorf("a later call: %q", got)
	}
	for _, m := range rec.responses() {
		if strings.Contains(m, "tool call aborted") {
			t.Errorf("the server answered the cancelled call: %s", m)
		}
	}
}

// recorder is a client Transport that keeps every response it reads.
type recorder struct {
	mcp.Transport
	mu   sync.Mutex
	seen []string
}

func (r *recorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	return recordingConn{c, r}, err
}

func (r *recorder) responses() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

type recordingConn struct {
	mcp.Connection
	r *recorder
}

func (c recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if resp, ok := m.(*jsonrpc.Response); ok {
		b, _ := jsonrpc.EncodeMessage(resp)
		c.r.mu.Lock()
		c.r.seen = append(c.r.seen, string(b))
		c.r.mu.Unlock()
	}
	return m, err
}
