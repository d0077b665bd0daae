//go:build linux

package agent_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/agent"
)

// TestRefuse: an agent that cannot start answers the client's hello with
// its reason (ErrKindStart) and returns only once the client has closed
// its end: the reason is read before the agent exits.
func TestRefuse(t *testing.T) {
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		agent.Refuse(context.Background(), toAgentR, fromAgentW, "conch agent: containment unavailable: why")
		fromAgentW.Close()
	}()
	c := agent.NewConn(fromAgentR, toAgentW)
	if err := c.Write(agent.Request{ID: 1, Op: agent.OpHello, Version: agent.Version}); err != nil {
		t.Fatal(err)
	}
	var resp agent.Response
	if err := c.Read(&resp); err != nil {
		t.Fatal(err)
	}
	if resp.ID != 1 || resp.Err == nil || resp.Err.Kind != agent.ErrKindStart || resp.Err.Msg != "conch agent: containment unavailable: why" || resp.Hello != nil {
		t.Fatalf("hello's answer: %+v (err %+v)", resp, resp.Err)
	}
	select {
	case <-returned:
		t.Fatal("Refuse returned before the client closed its end")
	case <-time.After(100 * time.Millisecond):
	}
	toAgentW.Close()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Refuse did not return once the client closed its end")
	}
}

// TestRefuseCancelled: a refusing agent's SIGTERM (its context) ends the
// wait for a client that never speaks.
func TestRefuseCancelled(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		agent.Refuse(ctx, r, io.Discard, "conch agent: why")
	}()
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Refuse did not return once its context was done")
	}
	w.Close() // ends the reader Refuse left behind
	r.Close()
}
