package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

const configUsage = `Usage: conch config [run|serve|acp] [flags]

Print the settings a subcommand (default serve) would run with, one
configuration key a line, each with where its value came from: the
configuration file (its path and line), a flag, or the default. Flags are
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
	return 0
}
