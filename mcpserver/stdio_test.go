package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

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
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
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
