package egress

import (
	"net/netip"
	"sync"
)

// The addresses that stand for names inside a session: the benchmarking
// range 198.18.0.0/15, which no network routes, less its first /24 (the
// namespace's own address lives there).
var (
	poolPrefix = netip.MustParsePrefix("198.18.0.0/15")
	poolFirst  = netip.MustParseAddr("198.18.1.0")
	poolSize   = 1<<17 - 256
)

// names maps the names the session's commands resolved to the addresses
// that stand for them, both ways. When the pool is used up it starts
// again from its first address, forgetting the name that held it: the
// oldest answers go first.
type names struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   int
}

func newNames() *names {
	return &names{byName: make(map[string]netip.Addr), byAddr: make(map[netip.Addr]string)}
}

// addr returns the address that stands for name, giving it one if it has
// none.
func (n *names) addr(name string) netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a
	}
	b := poolFirst.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n.next)
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	n.next = (n.next + 1) % poolSize
	if old, ok := n.byAddr[a]; ok {
		delete(n.byName, old)
	}
	n.byName[name], n.byAddr[a] = a, name
	return a
}

// name returns the name a stands for, if it stands for one.
func (n *names) name(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a]
	return name, ok
}
