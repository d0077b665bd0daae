//go:build linux && !cgo

package prestart

// early: without cgo no constructor starts an init (early_linux.c), and
// the Go start does.
func early() (p *earlyProcess, tried bool) { return nil, false }

// haveEarly: whether early_linux.c is built in.
const haveEarly = false

// earlyWanted: without cgo there is no other reading of the command
// line (TestEarlyWanted skips).
func earlyWanted(args []string, tun bool) (netNS, ok bool) { return false, false }
