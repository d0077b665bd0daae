package egress

import "net/netip"

func parseAddr(s string) (netip.Addr, error) { return netip.ParseAddr(s) }
