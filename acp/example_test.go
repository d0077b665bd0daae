//go:build linux

package acp_test

import (
	"context"
	"log"
	"os"
	"os/signal"

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
	// The runtime exists before the agent that announces its notices,
	// which is set before Serve: a notice comes only of a task a session
	// of Serve's started, so the hook always finds it.
	var a *acp.Agent
	rt := tasks.New(&tasks.Options{OnNotice: func(owner string) { a.Notify(owner) }})
	defer rt.Close()
	a = acp.NewAgent(tools.New(ex, &tools.Options{Tasks: rt}), &acp.AgentOptions{Version: "1.0.0"})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := a.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		log.Print(err)
	}
}
