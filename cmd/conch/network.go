package main

import (
	"errors"
	"flag"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/sandbox"
)

// The network policy's flags and keys (docs/sandbox.md#network):
// --network (`[sandbox.network] mode`, and the older `[sandbox] network`
// key, which takes the same values), --network-allow, --network-deny,
// --network-allow-local (lists) and --network-ask.
const oldNetworkKey = "sandbox.network"

// networkSettings are the network policy's flags besides --network.
type networkSettings struct {
	allow, deny, allowLocal patterns
	ask                     optBool
	// own are conch's own listeners (conch serve --http's), refused to
	// commands in every filtered mode.
	own []netip.AddrPort
}

// patterns is a repeatable flag of network patterns, each checked when
// given (a file's bad pattern is refused naming its line).
type patterns struct {
	vals  []string
	local bool // allow_local's: addresses and localhost, loopback with a port
}

func (p *patterns) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.vals, ",")
}

func (p *patterns) Set(s string) error {
	var err error
	if p.local {
		_, err = netpolicy.ParseLocal(s)
	} else {
		_, err = netpolicy.ParsePattern(s)
	}
	if err != nil {
		return err
	}
	p.vals = append(p.vals, s)
	return nil
}

func (p *patterns) isList()          {}
func (p *patterns) Values() []string { return p.vals }

// optBool is a boolean flag that knows whether it was given.
type optBool struct {
	v, given bool
}

func (b *optBool) String() string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("must be true or false")
	}
	b.v, b.given = v, true
	return nil
}

func (b *optBool) IsBoolFlag() bool { return true }

// addNetworkFlags registers the network policy's flags besides
// --network.
func (c *config) addNetworkFlags(fs *flag.FlagSet) {
	c.net.allowLocal.local = true
	c.net.ask.v = true
	fs.Var(&c.net.allow, "network-allow", "a destination commands may reach under --network allowlist: `PATTERN` example.com, *.example.com (subdomains), an address or CIDR, each with an optional :port (repeatable)")
	fs.Var(&c.net.deny, "network-deny", "a destination commands may not reach under --network public or allowlist, whatever allows it: `PATTERN` as --network-allow (repeatable)")
	fs.Var(&c.net.allowLocal, "network-allow-local", "a loopback or private destination commands may reach under --network public or allowlist: `ADDR:PORT` (127.0.0.1:5432, localhost:6379) or a private address or CIDR (repeatable)")
	fs.Var(&c.net.ask, "network-ask", "under --network allowlist, ask the user (where the client can ask) about a destination --network-allow does not name, rather than refuse it")
}

// netPolicy is the network policy the flags configure, for mode.
func (c *config) netPolicy(mode sandbox.Network) netpolicy.Policy {
	p := netpolicy.Policy{Mode: netpolicy.Mode(mode), Allow: c.net.allow.vals, Deny: c.net.deny.vals,
		AllowLocal: c.net.allowLocal.vals, Own: c.net.own}
	if c.net.ask.given {
		ask := c.net.ask.v
		p.Ask = &ask
	}
	return p
}

// networkMode is the network mode commands get: --network when given;
// else on under full-access (which lifts the network rules, as it lifts
// the file rules: docs/sandbox.md#modes), else the default, public.
func (c *config) networkMode() sandbox.Network {
	if !c.network.given && c.sandboxMode.v == string(sandbox.FullAccess) {
		return sandbox.NetworkOn
	}
	return sandbox.Network(c.network.v)
}

// ownListeners are the addresses of ln, conch's own listener (nil:
// none), as the network policy refuses them.
func ownListeners(ln net.Listener) []netip.AddrPort {
	if ln == nil {
		return nil
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return []netip.AddrPort{a.AddrPort()}
	}
	return nil
}

// networkArgs are the network policy's flags for conch agent on a
// remote host: the policy travels with the host's settings, and the
// agent enforces it there (docs/remote.md).
func (c *config) networkArgs() []string {
	var args []string
	for _, l := range []struct {
		flag string
		p    *patterns
	}{{"--network-allow", &c.net.allow}, {"--network-deny", &c.net.deny}, {"--network-allow-local", &c.net.allowLocal}} {
		for _, v := range l.p.vals {
			args = append(args, l.flag, v)
		}
	}
	if c.net.ask.given {
		args = append(args, "--network-ask="+strconv.FormatBool(c.net.ask.v))
	}
	return args
}

// Notes of the bash description about the network
// (docs/sandbox.md#network).
const (
	// networkOnNote: the network is on, by choice.
	networkOnNote = "Network on: commands reach the host's network as it is, with no policy, conch's own server port included."
	// networkDegradedFmt: the default policy could not be enforced.
	networkDegradedFmt = "The network policy (%s) cannot be enforced on this host (%s): commands reach the host's network as it is, conch's own server port included."
)
