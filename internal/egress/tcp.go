//go:build linux

package egress

import (
	"io"
	"net"
	"net/netip"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// handleTCP decides a command's connection before its handshake
// completes: refused, or not reachable, it is reset (the command's
// connect fails with ECONNREFUSED); allowed, the server connects first,
// then completes the handshake and splices the two. DNS over TCP (port
// 53, any address) is answered by the session's resolver.
func (s *Session) handleTCP(r *tcp.ForwarderRequest) {
	// The forwarder calls this in a goroutine of its own: the connection
	// is handled here, without another hand-off.
	if !s.enter() {
		r.Complete(true)
		return
	}
	defer s.wg.Done()
	id := r.ID()
	dst, _ := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	s.connectTCP(r, dst, int(id.LocalPort))
}

func (s *Session) connectTCP(r *tcp.ForwarderRequest, dst netip.Addr, port int) {
	if port == 53 {
		c, ok := s.accept(r)
		if ok {
			defer s.untrack(c)
			s.serveDNSStream(c)
		}
		return
	}
	v := s.decide(dst, port)
	if len(v.addrs) == 0 {
		r.Complete(true)
		return
	}
	up, err := s.dial("tcp", v, port)
	if err != nil {
		s.debug("egress: connect", "host", v.host, "port", port, "error", err)
		r.Complete(true)
		return
	}
	if !s.track(up) {
		r.Complete(true)
		return
	}
	defer s.untrack(up)
	c, ok := s.accept(r)
	if !ok {
		return
	}
	defer s.untrack(c)
	splice(c, up)
}

// accept completes the handshake of r.
func (s *Session) accept(r *tcp.ForwarderRequest) (net.Conn, bool) {
	var wq waiter.Queue
	ep, e := r.CreateEndpoint(&wq)
	if e != nil {
		r.Complete(true)
		return nil, false
	}
	r.Complete(false)
	ep.SocketOptions().SetKeepAlive(true)
	c := gonet.NewTCPConn(&wq, ep)
	if !s.track(c) {
		return nil, false
	}
	return c, true
}

// halfCloser is a connection whose write side closes alone.
type halfCloser interface {
	CloseWrite() error
}

// splice copies both ways until both have ended, passing each end of
// stream on as a half close.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 256<<10)
		io.CopyBuffer(dst, src, buf)
		if h, ok := dst.(halfCloser); ok {
			h.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
