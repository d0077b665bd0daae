package netpolicy

import "net/netip"

// metadata are the cloud providers' instance metadata and control
// addresses: AWS, GCP, Azure, Oracle and OpenStack (169.254.169.254 and
// AWS's IPv6 fd00:ec2::254), AWS ECS task metadata (169.254.170.2) and
// DNS (169.254.169.253), Alibaba (100.100.100.200), and Azure's
// WireServer (168.63.129.16, a public address).
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.169.253"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// notPublic are the ranges refused as "a private address" besides what
// netip calls private, link-local or multicast: shared address space
// (CGNAT, 100.64.0.0/10), "this network" (0.0.0.0/8), IETF protocol
// assignments (192.0.0.0/24), benchmarking (198.18.0.0/15, which conch's
// resolver also uses inside a session), reserved (240.0.0.0/4, broadcast
// included), and IPv6 discard and ORCHID ranges. The documentation
// ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32)
// count as public: no network routes them, and tests stand them in for
// the internet.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:10::/28"),
	netip.MustParsePrefix("2001:20::/28"),
}

// embedsIPv4 are IPv6 ranges that carry an IPv4 address in their last
// 32 bits (NAT64 translates a connection there to that address).
var embedsIPv4 = []netip.Prefix{
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// Classify returns why a is not a public destination, as a denial
// reason, or "" for a public address: ReasonMetadata for a cloud
// metadata address, ReasonHostOwn for loopback, the unspecified address
// and the host's own addresses (hostOwn may be nil), ReasonPrivate for
// private, link-local, multicast and reserved ranges. IPv4-mapped and
// NAT64 IPv6 addresses are judged by the IPv4 address they carry.
func Classify(a netip.Addr, hostOwn func(netip.Addr) bool) string {
	a = a.Unmap()
	if a.Is6() {
		for _, p := range embedsIPv4 {
			if p.Contains(a) {
				b := a.As16()
				if r := Classify(netip.AddrFrom4([4]byte(b[12:])), hostOwn); r != "" {
					return r
				}
			}
		}
	}
	for _, m := range metadata {
		if a == m {
			return ReasonMetadata
		}
	}
	switch {
	case !a.IsValid(), a.IsLoopback(), a.IsUnspecified():
		return ReasonHostOwn
	case hostOwn != nil && hostOwn(a):
		return ReasonHostOwn
	case a.IsPrivate(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(), a.IsMulticast():
		return ReasonPrivate
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return ReasonPrivate
		}
	}
	return ""
}
