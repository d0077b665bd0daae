// Command conch is a bash tool for AI agents: an MCP server (conch serve),
// an ACP agent for editors (conch acp), and a way to try one command as a
// model would see it (conch run).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `conch: a bash tool for AI agents

Usage:
  conch run [flags] -- <command>   run one command and print what a model sees
  conch serve [flags]              serve the tools over MCP (stdio, or --http ADDR)
  conch acp [flags]                an ACP agent on stdio for editors (Zed)
  conch config [run|serve|acp]     print the effective settings and where each came from
  conch check -- '<command line>'  decide a command line by the permission
                                   rules, running nothing
  conch doctor [flags]             print what this host gives conch
  conch audit verify|tail [FILE]   check the audit log's hash chain, or read it
  conch agent [flags]              serve a remote conch on stdio (started over SSH)
  conch version                    print the version
  conch help                       this text

Run 'conch <command> --help' for the flags of a command.
`

// stopSignals end conch cleanly: every task killed, the spill files
// removed. SIGHUP is among them because a closed terminal or a dying
// parent sends it, and its default action would kill conch without that
// clean-up.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	stopProfile := startProfile(os.Args[1:])
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	stop()
	endPrestart()
	os.Exit(code)
}

// startProfile writes a CPU profile of `conch serve`, `acp` or `run` to
// the file $CONCH_CPUPROFILE names, until the returned func is called
// (docs/operations.md#profiling). Other subcommands (the inits and agents
// the server starts inherit the variable) write none.
func startProfile(args []string) func() {
	path := os.Getenv("CONCH_CPUPROFILE")
	if path == "" || len(args) == 0 || (args[0] != "serve" && args[0] != "acp" && args[0] != "run") {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conch: CONCH_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "conch: CONCH_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// Main runs conch with args (without the program name) and returns the
// exit status. ctx ends on SIGINT, SIGTERM or SIGHUP.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], stdout, stderr)
	case "serve":
		return serveCommand(ctx, args[1:], stdin, stdout, stderr)
	case "acp":
		return acpCommand(ctx, args[1:], stdin, stdout, stderr)
	case "config":
		return configCommand(args[1:], stdout, stderr)
	case "check":
		return checkCommand(args[1:], stdout, stderr)
	case "doctor":
		return doctorCommand(ctx, args[1:], stdout, stderr)
	case "audit":
		return auditCommand(ctx, args[1:], stdout, stderr)
	case "agent":
		return agentCommand(ctx, args[1:], stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "conch", version)
		return 0
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "conch: unknown command %q\n\n%s", args[0], usage)
	return 2
}
