package main

import (
	"github.com/conch-dev/conch/internal/sandbox"

	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
)

const configUsage = `Usage: conch config [run|serve|acp] [flags]

Print the settings a subcommand (default serve) would run with, one
configuration key a line, each with where its value came from: the
configuration file (its path and line), a flag, or the default. Then the
permission rules (rules.*) the same way, and the deny and ask rules the
project file (.conch/config.toml) of the working directory (the cwd
setting, else the current directory) adds for sessions there. Flags are
those of the subcommand; --config names the file to read.

Flags:
`

// configCommand is `conch config`.
func configCommand(args []string, stdout, stderr io.Writer) int {
	sub := "serve"
	if len(args) > 0 && (args[0] == "run" || args[0] == "serve" || args[0] == "acp") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("conch config "+sub, flag.ContinueOnError)
	var c config
	switch sub {
	case "serve":
		c.addFlags(fs, 45000, slog.LevelInfo)
		serveFlags(fs)
	case "acp":
		c.addFlags(fs, 0, slog.LevelInfo)
	case "run":
		c.addFlags(fs, 0, slog.LevelWarn)
	}
	set, code, ok := parseFlags(fs, args, configUsage, stdout, stderr)
	if !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conch config: unexpected argument %q\nRun 'conch config --help' for usage.\n", fs.Arg(0))
		return exitUsage
	}
	set.print(stdout)
	dir := c.cwd
	if dir == "" {
		dir = "."
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if err := set.printRules(stdout, dir, sandbox.Mode(c.sandboxMode.v), sandbox.Network(c.network.v)); err != nil {
		fmt.Fprintf(stderr, "conch config: %v\n", err)
		return exitUsage
	}
	return 0
}
