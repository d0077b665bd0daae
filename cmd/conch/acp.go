package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/conch-dev/conch/acp"
)

const acpUsage = "Usage: conch acp [flags]\n\n" +
	"An Agent Client Protocol agent on stdio: each prompt runs as one bash command\n" +
	"(& runs it in the background; /tasks, /output <id>, /kill <id> manage tasks;\n" +
	"/help says so). A prompt sent while one runs waits for it.\n" +
	"Sessions are recorded under $XDG_STATE_HOME/conch/sessions for session/load.\n\nFlags:\n"

// acpCommand is `conch acp`: an ACP agent on stdin/stdout for editors
// (Zed), whose prompts are shell commands. It returns when stdin ends or
// ctx is done (SIGINT/SIGTERM), after killing every task.
func acpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch acp", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 0, slog.LevelInfo)
	set, code, ok := parseFlags(fs, args, acpUsage, stdout, stderr)
	if !ok {
		return code
	}
	c.rules = set.rules
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conch acp: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	// The task runtime is built before the agent that announces its
	// notices, and the agent is set before Serve: a notice comes only of
	// a task a session of Serve's started, so every call of the hook
	// happens after that assignment (each go statement on the way orders
	// it) and reads a plain variable.
	var agent *acp.Agent
	c.onNotice = func(owner string) { agent.Notify(owner) }
	log := c.newLogger(stderr)
	c.configFile = set.file
	c.spareInits = true
	c.warm = true
	st, err := c.build(log)
	if err != nil {
		fmt.Fprintln(stderr, "conch acp:", err)
		return 2
	}
	st.logStart(log, "acp", set)
	// A client that closes our stdout must not kill us with SIGPIPE
	// before the tasks are killed: with SIGPIPE notified, the write fails
	// instead. (Notify, not Ignore: an ignored signal stays ignored in
	// the commands we start.)
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	agent = acp.NewAgent(st.tools, &acp.AgentOptions{
		SessionDir: filepath.Join(st.home, "sessions"),
		Logger:     log,
		Version:    version,
	})
	serveErr := agent.Serve(ctx, stdin, stdout)
	if err := st.close(); err != nil {
		log.Warn("conch acp: closing the executor", "err", err)
	}
	if serveErr != nil {
		fmt.Fprintln(stderr, "conch acp:", serveErr)
		return 1
	}
	return 0
}
