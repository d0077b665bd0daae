//go:build linux

package main

import (
	// A conch re-executed by nsinit.Start as `conch __init` is the init
	// of a session's namespaces: package entry runs it from its
	// initialisation, before most of the binary's packages and before
	// main.
	_ "github.com/conch-dev/conch/internal/nsinit/entry"
	// conch run's init is started by package prestart's initialisation,
	// beside the rest of conch's start.
	"github.com/conch-dev/conch/internal/prestart"
)

// endPrestart ends the init package prestart started for a conch run
// that did not take it (containment off in the configuration file, a
// usage error), and waits until it is gone.
func endPrestart() { prestart.Close() }
