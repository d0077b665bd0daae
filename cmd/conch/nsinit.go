//go:build linux

package main

// A conch re-executed by nsinit.Start as `conch __init` is the init of a
// session's namespaces: package entry runs it from its initialisation,
// before most of the binary's packages and before main.
import _ "github.com/conch-dev/conch/internal/nsinit/entry"
