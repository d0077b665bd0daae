// Package netpolicy decides which destinations a session's commands may
// reach (docs/sandbox.md#network): the network modes, the patterns of
// allow, deny and allow_local, the address classes every policy mode
// refuses, and the reasons a denial marker names. It decides only; package
// egress enforces.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Mode is how a session's commands reach the network.
type Mode string

const (
	// Off: an empty network namespace, nothing reachable.
	Off Mode = "off"
	// Public (the default): every destination but the host's own
	// addresses, its loopback services, private and link-local ranges and
	// the cloud metadata address, and what Deny names.
	Public Mode = "public"
	// Allowlist: only what Allow names (and AllowLocal), asking the user
	// about the rest when Ask holds.
	Allowlist Mode = "allowlist"
	// On: the host's network as it is, no policy.
	On Mode = "on"
)

// Modes are the values of --network, from the widest.
var Modes = []Mode{On, Public, Allowlist, Off}

// ParseMode checks s, a value of --network or [sandbox.network] mode.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown network mode %q (want on, public, allowlist or off)", s)
}

// rank orders the modes from the widest (on) to the strictest (off).
func (m Mode) rank() int {
	for i, o := range Modes {
		if o == m {
			return i
		}
	}
	return -1 // unknown: wider than all
}

// WiderThan reports whether m lets commands reach more than o.
func (m Mode) WiderThan(o Mode) bool { return m.rank() < o.rank() }

// Filtered reports whether m sends the session's traffic through conch
// (public and allowlist): a network namespace with conch's stack as its
// only way out.
func (m Mode) Filtered() bool { return m == Public || m == Allowlist }

// Reasons a connection is refused, as the marker
// `[sandbox: network access to <host>:<port> denied (<reason>)]` names
// them; a deny pattern gives "denied by <pattern>" (DeniedBy).
const (
	ReasonNotAllowed = "not in the allowlist"
	ReasonPrivate    = "a private address"
	ReasonHostOwn    = "the host's own address"
	ReasonMetadata   = "the cloud metadata address"
	ReasonDeclined   = "the user declined"
)

// DeniedBy is the reason of a connection a deny pattern refused.
func DeniedBy(pattern string) string { return "denied by " + pattern }

// Pattern is one entry of allow, deny or allow_local: a host name
// (`example.com`), every subdomain of one (`*.example.com`), an address
// (`10.0.0.5`, `::1`) or a CIDR (`10.0.0.0/8`), with an optional port
// (`example.com:443`, `127.0.0.1:5432`, `[::1]:5432`). A name matches
// itself only (`*.example.com` does not match `example.com`), case
// folded; a pattern without a port matches every port.
type Pattern struct {
	raw      string
	name     string       // lowercased, no trailing dot; "" for an address
	wildcard bool         // name is the suffix after "*."
	prefix   netip.Prefix // valid for an address or CIDR
	port     int          // 0: any
}

// String is the pattern as written.
func (p Pattern) String() string { return p.raw }

// Port is the pattern's port, 0 for any.
func (p Pattern) Port() int { return p.port }

// Prefix is the pattern's address range; invalid for a name.
func (p Pattern) Prefix() netip.Prefix { return p.prefix }

// IsName reports whether p names hosts rather than addresses.
func (p Pattern) IsName() bool { return p.name != "" }

// ParsePattern parses one pattern.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{raw: s}
	bad := func(why string) (Pattern, error) {
		return Pattern{}, fmt.Errorf("network pattern %q: %s", s, why)
	}
	host := strings.TrimSpace(s)
	if host == "" || host != s {
		return bad("empty or padded")
	}
	port := ""
	switch {
	case strings.HasPrefix(host, "["):
		end := strings.Index(host, "]")
		if end < 0 {
			return bad("no closing bracket")
		}
		rest := host[end+1:]
		host = host[1:end]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return bad("text after the bracket")
			}
			port = rest[1:]
		}
	case strings.Count(host, ":") == 1:
		host, port, _ = strings.Cut(host, ":")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad("port must be 1 to 65535")
		}
		p.port = n
	}
	if pr, err := netip.ParsePrefix(host); err == nil {
		p.prefix = pr.Masked()
		return p, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return bad("an address with a zone")
		}
		a = a.Unmap()
		p.prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		p.wildcard, name = true, rest
	}
	if !validName(name) {
		return bad("not a host name, address or CIDR")
	}
	p.name = name
	return p, nil
}

// validName accepts a DNS name of letters, digits, hyphens and
// underscores in dot-separated labels.
func validName(n string) bool {
	if n == "" || len(n) > 253 {
		return false
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// MatchName reports whether p matches host name (any case, trailing dot
// or not) on port (0 matches a pattern of any port only).
func (p Pattern) MatchName(name string, port int) bool {
	if p.name == "" || !p.portOK(port) {
		return false
	}
	name = CanonicalName(name)
	if p.wildcard {
		return strings.HasSuffix(name, "."+p.name)
	}
	return name == p.name
}

// MatchAddr reports whether p matches address a on port.
func (p Pattern) MatchAddr(a netip.Addr, port int) bool {
	return p.prefix.IsValid() && p.portOK(port) && p.prefix.Contains(a.Unmap())
}

func (p Pattern) portOK(port int) bool { return p.port == 0 || p.port == port }

// CanonicalName is name as patterns and grants compare it: lowercased,
// without a trailing dot.
func CanonicalName(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// Policy is the network policy of a session as configured: the
// [sandbox.network] table, its flags, and a project's narrowing. It
// travels as JSON inside the sandbox plan.
type Policy struct {
	Mode       Mode     `json:"mode"`
	Allow      []string `json:"allow,omitempty"`
	Deny       []string `json:"deny,omitempty"`
	AllowLocal []string `json:"allowLocal,omitempty"`
	// Ask, in allowlist mode, makes a destination allow does not name a
	// question to the user; nil means the default, true.
	Ask *bool `json:"ask,omitempty"`
	// Own are conch's own listeners (its HTTP port), set by conch, not
	// configured: a connection to one is refused in every filtered mode,
	// allow_local or not (docs/security.md). An unspecified address
	// stands for every address of the host and its loopback.
	Own []netip.AddrPort `json:"own,omitempty"`
}

// OwnLoopback are the loopback addresses of conch's own listeners: the
// session's loopback listens there too, so that a connection to one is
// refused by conch (and named) rather than by the session's empty
// loopback.
func (p Policy) OwnLoopback() []netip.AddrPort {
	var out []netip.AddrPort
	for _, o := range p.Own {
		switch a := o.Addr().Unmap(); {
		case a.IsUnspecified():
			out = append(out, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), o.Port()),
				netip.AddrPortFrom(netip.IPv6Loopback(), o.Port()))
		case a.IsLoopback():
			out = append(out, netip.AddrPortFrom(a, o.Port()))
		}
	}
	return out
}

// Asks reports whether an unlisted destination asks the user.
func (p Policy) Asks() bool { return p.Mode == Allowlist && (p.Ask == nil || *p.Ask) }

// Rules is a compiled Policy. Its methods are safe for concurrent use.
type Rules struct {
	Policy     Policy
	allow      []Pattern
	deny       []Pattern
	allowLocal []Pattern
}

// Compile checks p and parses its patterns. An allow_local entry must
// name addresses (loopback or private; a name other than localhost is
// refused: what it resolves to could change) and, for loopback, a port:
// conch opens that port on the session's own loopback.
func (p Policy) Compile() (*Rules, error) {
	if _, err := ParseMode(string(p.Mode)); err != nil {
		return nil, err
	}
	r := &Rules{Policy: p}
	var errs []error
	parse := func(list []string, key string) []Pattern {
		var out []Pattern
		for _, s := range list {
			pt, err := ParsePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				continue
			}
			out = append(out, pt)
		}
		return out
	}
	r.allow = parse(p.Allow, "allow")
	r.deny = parse(p.Deny, "deny")
	for _, s := range p.AllowLocal {
		pts, err := ParseLocal(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allow_local: %w", err))
			continue
		}
		r.allowLocal = append(r.allowLocal, pts...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// ParseLocal parses an allow_local entry: an address or CIDR, or
// localhost (127.0.0.1 and ::1), with a port where it is loopback.
func ParseLocal(s string) ([]Pattern, error) {
	name, port, hasPort := strings.Cut(s, ":")
	if strings.EqualFold(name, "localhost") && !strings.Contains(port, ":") {
		if !hasPort {
			return nil, fmt.Errorf("%q: a loopback entry needs a port (localhost:5432)", s)
		}
		a, err := ParsePattern("127.0.0.1:" + port)
		if err != nil {
			return nil, err
		}
		b, _ := ParsePattern("[::1]:" + port)
		a.raw, b.raw = s, s
		return []Pattern{a, b}, nil
	}
	p, err := ParsePattern(s)
	if err != nil {
		return nil, err
	}
	if p.IsName() {
		return nil, fmt.Errorf("%q: allow_local takes addresses and CIDRs (or localhost), not names", s)
	}
	if p.prefix.Addr().IsLoopback() && p.port == 0 {
		return nil, fmt.Errorf("%q: a loopback entry needs a port (127.0.0.1:5432)", s)
	}
	return []Pattern{p}, nil
}

// Loopback are the loopback addresses and ports allow_local opens: the
// session's own loopback listens there and conch forwards each
// connection to the host's (a session's 127.0.0.1 is its own).
func (r *Rules) Loopback() []netip.AddrPort {
	var out []netip.AddrPort
	for _, p := range r.allowLocal {
		if a := p.prefix.Addr(); a.IsLoopback() && p.port != 0 {
			if p.prefix.Bits() == a.BitLen() {
				out = append(out, netip.AddrPortFrom(a, uint16(p.port)))
			}
		}
	}
	return out
}

// DenyName returns the deny pattern that refuses name on port ("" and
// false when none does): port 0 asks about a pattern without a port,
// which refuses the name whatever the port.
func (r *Rules) DenyName(name string, port int) (string, bool) {
	for _, p := range r.deny {
		if port == 0 && p.port != 0 {
			continue
		}
		if p.MatchName(name, port) {
			return p.raw, true
		}
	}
	return "", false
}

// DenyAddr returns the deny pattern that refuses a on port.
func (r *Rules) DenyAddr(a netip.Addr, port int) (string, bool) {
	for _, p := range r.deny {
		if p.MatchAddr(a, port) {
			return p.raw, true
		}
	}
	return "", false
}

// AllowName reports whether allow names name on port (port 0: for some
// port).
func (r *Rules) AllowName(name string, port int) bool {
	for _, p := range r.allow {
		if p.IsName() && (port == 0 && p.MatchName(name, p.port) || p.MatchName(name, port)) {
			return true
		}
	}
	return false
}

// AllowAddr reports whether allow names address a on port.
func (r *Rules) AllowAddr(a netip.Addr, port int) bool {
	for _, p := range r.allow {
		if p.MatchAddr(a, port) {
			return true
		}
	}
	return false
}

// Local reports whether allow_local lets commands reach a on port.
func (r *Rules) Local(a netip.Addr, port int) bool {
	for _, p := range r.allowLocal {
		if p.MatchAddr(a, port) {
			return true
		}
	}
	return false
}

// Refused returns the reason an address of class other than public is
// refused, "" for an address that may be reached: a public address, or
// one allow_local names with its port. hostOwn reports the host's own
// addresses (its interfaces').
func (r *Rules) Refused(a netip.Addr, port int, hostOwn func(netip.Addr) bool) string {
	reason := Classify(a, hostOwn)
	if reason == "" || r.Local(a, port) {
		return ""
	}
	return reason
}
