//go:build linux

package egress

import (
	"fmt"
	"net"
	"net/netip"
	"os"
)

// serveListener answers a loopback listener of the namespace: a
// connection to one of conch's own ports is recorded and reset; one to
// an allow_local address is forwarded to the same address and port on
// the host (the session's loopback is its own).
func (s *Session) serveListener(addr string, f *os.File) error {
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("egress: listener %s: %w", addr, err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		l.Close()
		return fmt.Errorf("egress: listener %s: %w", addr, err)
	}
	if !s.goes(func() {
		<-s.ctx.Done()
		l.Close()
	}) || !s.goes(func() { s.acceptLoop(l, ap) }) {
		l.Close()
	}
	return nil
}

func (s *Session) acceptLoop(l net.Listener, ap netip.AddrPort) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if !s.goes(func() { s.forwardLocal(c, ap) }) {
			c.Close()
		}
	}
}

func (s *Session) forwardLocal(c net.Conn, ap netip.AddrPort) {
	if !s.track(c) {
		return
	}
	defer s.untrack(c)
	port := int(ap.Port())
	if s.own(ap.Addr(), port) {
		s.record(ap.Addr().String(), port, ReasonOwnServer)
		reset(c)
		return
	}
	up, err := s.dial("tcp", verdict{addrs: []netip.Addr{ap.Addr()}}, port)
	if err != nil {
		s.debug("egress: allow_local", "addr", ap, "error", err)
		reset(c)
		return
	}
	if !s.track(up) {
		return
	}
	defer s.untrack(up)
	splice(c, up)
}

// reset closes c with a reset rather than an end of stream, as a refused
// connection reads.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
