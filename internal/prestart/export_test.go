//go:build linux

package prestart

// StartGo is the start of this package's initialisation, whatever the
// build: for TestEarlyStartMatches.
func StartGo(netNS bool) (*Process, error) { return start(netNS) }

// HaveEarly is haveEarly.
const HaveEarly = haveEarly
