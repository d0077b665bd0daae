//go:build linux

// Package entry runs a conch re-executed by nsinit.Start as `conch
// __init`: the init of a session's namespaces, not a command line tool.
// It runs from this package's initialisation, which comes as soon as
// nsinit's own dependencies are initialised: Go initialises packages in
// the order of their import paths among those whose dependencies are
// done (the spec's "Package initialization"), so most of the binary's
// other packages (the MCP SDK, SSH, the network stack, JSON schemas) are
// never initialised in an init, whose start every contained command
// waits for. Nothing of main (flags, signal handling, logs) applies.
package entry

import (
	"os"

	"github.com/conch-dev/conch/internal/nsinit"
)

func init() {
	if len(os.Args) == 2 && os.Args[1] == nsinit.HelperArg {
		os.Exit(nsinit.Main())
	}
}
