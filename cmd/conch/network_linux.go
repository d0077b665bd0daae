//go:build linux

package main

import (
	"fmt"
	"log/slog"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/sandbox"
)

// checkNetwork makes sure this host can give pol's network mode
// (docs/sandbox.md#network): public and allowlist need a TUN device the
// init can open (egress.Probe). A mode the user gave refuses to start
// naming the cause; the default degrades to on, logged once, and said in
// the bash description (the returned note). Under on it says that the
// server's own port is reachable. It returns what doctor's network line
// says, and warn, which logs what the log must say, for the caller to
// call once the executor was built.
func (c *config) checkNetwork(pol *sandbox.Policy) (line, note string, warn func(*slog.Logger), err error) {
	mode := netpolicy.Mode(pol.Network)
	switch {
	case mode == netpolicy.On:
		return "on (the host's network as it is, no policy; conch's own server port included)", networkOnNote, warnNetworkOn, nil
	case mode == netpolicy.Off:
		return "off (an empty network namespace per session)", "", noWarning, nil
	}
	how := "a network namespace per session, its only way out conch's user-space TCP/IP stack (gVisor) on a TUN device; DNS answered by conch"
	if perm, err := egress.DeviceMode(); err == nil {
		how += fmt.Sprintf("; %s mode %04o", egress.TUNDevice, perm)
	}
	perr := egress.Probe()
	if perr == nil {
		return fmt.Sprintf("%s (%s)", mode, how), "", noWarning, nil
	}
	cause := perr.Error()
	if c.network.given {
		return "", "", nil, fmt.Errorf("network %s: this host cannot enforce it: %s", mode, cause)
	}
	pol.Network = sandbox.NetworkOn
	pol.Net.Mode = netpolicy.On
	warn = func(log *slog.Logger) {
		log.Warn("network policy unavailable: commands reach the host's network as it is, conch's own server port included", "mode", mode, "cause", cause)
	}
	return fmt.Sprintf("on (the default %s cannot be enforced: %s)", mode, cause), fmt.Sprintf(networkDegradedFmt, mode, cause), warn, nil
}

func noWarning(*slog.Logger) {}

func warnNetworkOn(log *slog.Logger) {
	log.Warn("network on: commands reach the host's network as it is, with no policy; conch's own server port is reachable to them")
}
