//go:build linux

package mcpserver_test

import (
	"context"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// A program that embeds conch's MCP server: stdio here, and the HTTP
// handler on a loopback port. Closing in order (server, tasks, executor)
// kills every process conch started.
func Example() {
	ex, err := local.New(nil) // defaults: 120 s timeout, 64000-byte tails, …
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()
	rt := tasks.New(nil)
	defer rt.Close()
	srv := mcpserver.New(tools.New(ex, &tools.Options{Tasks: rt}), nil)
	defer srv.Close()

	go http.ListenAndServe("127.0.0.1:7433", srv.HTTPHandler())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
		log.Print(err)
	}
}
