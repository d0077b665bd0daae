//go:build linux

package main

import (
	"os"

	"github.com/conch-dev/conch/internal/nsinit"
)

// A conch re-executed by nsinit.Start as `conch __init` is the init of a
// session's namespace, not a command line tool: it runs before main, so
// that nothing of main (flags, signal handling, logs) applies to it.
func init() {
	if len(os.Args) == 2 && os.Args[1] == nsinit.HelperArg {
		os.Exit(nsinit.Main())
	}
}
