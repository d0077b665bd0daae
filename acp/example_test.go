//go:build linux

package acp_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"sync/atomic"

	"github.com/conch-dev/conch/acp"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// A program that is an ACP agent for an editor, on stdio: each prompt
// runs as one bash command, drawn as a terminal card. The task runtime
// tells the agent when a background task ends, so that the session hears
// of it at once.
func Example() {
	ex, err := local.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()
	// The runtime exists before the agent that announces its notices.
	var agent atomic.Pointer[acp.Agent]
	rt := tasks.New(&tasks.Options{OnNotice: func(owner string) {
		if a := agent.Load(); a != nil {
			a.Notify(owner)
		}
	}})
	defer rt.Close()
	a := acp.NewAgent(tools.New(ex, &tools.Options{Tasks: rt}), &acp.AgentOptions{Version: "1.0.0"})
	agent.Store(a)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := a.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		log.Print(err)
	}
}
