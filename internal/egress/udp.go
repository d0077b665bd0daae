//go:build linux

package egress

import (
	"net"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// udpIdle ends a UDP flow after this long without a datagram either way;
// dnsIdle a DNS flow (a resolver's socket sends a query or two).
const (
	udpIdle = 60 * time.Second
	dnsIdle = 5 * time.Second
)

// handleUDP takes a command's new UDP flow: DNS (port 53, any address)
// is answered by the session's resolver; another flow is decided like a
// TCP connection, and relayed from a socket of the server's when
// allowed, dropped when not.
func (s *Session) handleUDP(r *udp.ForwarderRequest) bool {
	s.mu.Lock()
	full := s.udpFlows >= maxUDPFlows
	if !full {
		s.udpFlows++
	}
	s.mu.Unlock()
	if full {
		return true // dropped
	}
	id := r.ID()
	var wq waiter.Queue
	ep, e := r.CreateEndpoint(&wq)
	if e != nil {
		s.flowDone()
		return true
	}
	c := gonet.NewUDPConn(&wq, ep)
	dst, _ := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	port := int(id.LocalPort)
	if !s.goes(func() {
		defer s.flowDone()
		if !s.track(c) {
			return
		}
		defer s.untrack(c)
		if port == 53 {
			s.serveDNSPackets(c)
			return
		}
		s.relayUDP(c, dst, port)
	}) {
		c.Close()
		s.flowDone()
	}
	return true
}

func (s *Session) flowDone() {
	s.mu.Lock()
	s.udpFlows--
	s.mu.Unlock()
}

// relayUDP relays one flow, decided first.
func (s *Session) relayUDP(c *gonet.UDPConn, dst netip.Addr, port int) {
	v := s.decide(dst, port)
	if len(v.addrs) == 0 {
		return
	}
	up, err := s.dial("udp", v, port)
	if err != nil {
		s.debug("egress: udp", "host", v.host, "port", port, "error", err)
		return
	}
	if !s.track(up) {
		return
	}
	defer s.untrack(up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 65535)
		for {
			src.SetReadDeadline(time.Now().Add(udpIdle))
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
}
