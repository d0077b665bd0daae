package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/shell"
)

const agentUsage = `Usage: conch agent [flags]

Serve conch's agent protocol on stdin and stdout, for a conch on another
machine that reaches this one over SSH: run the commands it sends here,
with this host's containment and sandbox (by default: containment where
the host allows it, and workspace-write with --cwd as the workspace; a
host that cannot enforce a mode not given explicitly runs the commands
with what it allows). When stdin ends (the connection closed), every
command it started is killed. Nothing but protocol frames is written to
stdout; logs go to stderr. The conch that starts the agent passes its own
settings as flags; the agent reads no configuration file.

Flags:
`

// agentCommand is `conch agent`.
func agentCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conch agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	var c config
	c.logLevel = logLevel{slog.LevelWarn}
	fs.Var(&c.logLevel, "log-level", "least level of the log lines on stderr (debug, info, warn, error)")
	c.addExecutorFlags(fs)
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, agentUsage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "Run 'conch agent --help' for usage.")
		return exitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "conch agent: unexpected argument %q\nRun 'conch agent --help' for usage.\n", fs.Arg(0))
		return exitUsage
	}
	if stdout == os.Stdout {
		// Frames only on stdout: whatever else in this process writes to
		// file descriptor 1 (a library, a panic) goes to stderr instead.
		fd, err := unix.Dup(1)
		if err == nil {
			err = unix.Dup2(2, 1)
		}
		if err != nil {
			fmt.Fprintf(stderr, "conch agent: keep stdout for frames: %v\n", err)
			return 1
		}
		out := os.NewFile(uintptr(fd), "frames")
		defer out.Close()
		stdout = out
	}
	log := c.newLogger(stderr)
	c.warm = true // the far side's sessions run one command after another too
	ex, enforces, err := c.agentExecutor(log)
	if err != nil {
		// Said on stderr, and to the client in answer to its hello, which
		// it reads before this process exits (agent.Refuse).
		msg := fmt.Sprintf("conch agent: %v", err)
		fmt.Fprintln(stderr, msg)
		agent.Refuse(ctx, stdin, stdout, msg)
		return agent.RefusedStatus
	}
	hello := agent.Hello{Conch: version, OS: runtime.GOOS, Arch: runtime.GOARCH, Cwd: enforces.cwd,
		Enforces: enforces.String()}
	served := make(chan error, 1)
	go func() { served <- agent.Serve(stdin, stdout, ex, hello) }()
	select {
	case err := <-served:
		if err != nil {
			fmt.Fprintf(stderr, "conch agent: %v\n", err)
			return 1
		}
		return 0
	case <-ctx.Done():
		// Serve is blocked reading stdin; end what it started and leave.
		ex.Close()
		return 1
	}
}

// agentExecutor is the executor of the flags, composed as the local
// server's (config.executor): the defaults a host cannot enforce degrade
// to what it allows, with a warning on stderr, and a mode given
// explicitly that it cannot enforce is an error.
func (c *config) agentExecutor(log *slog.Logger) (shell.Executor, enforcement, error) {
	if err := c.agentCwd(); err != nil {
		return nil, enforcement{}, err
	}
	if err := c.checkCwd(); err != nil {
		return nil, enforcement{}, err
	}
	return c.executor(c.localOptions(), log)
}

// agentCwd gives an agent started without --cwd in / the user's home as
// its working directory, and with it the workspace of workspace-write:
// an engine's exec starts in the image's working directory, often /, and
// a workspace of / would let the sandbox's commands write anywhere. With
// no home to go to (HOME unset, /, or not a directory) the agent refuses
// to start.
func (c *config) agentCwd() error {
	if c.cwd != "" {
		return nil
	}
	if wd, err := os.Getwd(); err != nil || wd != "/" {
		return nil
	}
	home := os.Getenv("HOME")
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() || !filepath.IsAbs(home) || filepath.Clean(home) == "/" {
		return fmt.Errorf("the working directory is / and HOME (%q) is no other directory: give --cwd", home)
	}
	c.cwd = filepath.Clean(home)
	return nil
}
