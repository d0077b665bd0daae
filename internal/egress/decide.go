//go:build linux

package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/shell"
)

// verdict is what the policy made of one connection.
type verdict struct {
	host   string       // what a marker names: the name asked for, else the address
	addrs  []netip.Addr // allowed: where to connect, in order
	reason string       // refused: why ("" with no addrs: the name did not resolve)
}

// decide decides a connection to dst:port (dst as the command saw it:
// an address standing for a name, or an address), asking the user when
// the policy says so. It records the refusals.
func (s *Session) decide(dst netip.Addr, port int) verdict {
	v := s.judge(dst, port)
	if v.reason != "" {
		s.record(v.host, port, v.reason)
	}
	return v
}

func (s *Session) judge(dst netip.Addr, port int) verdict {
	dst = dst.Unmap()
	if poolPrefix.Contains(dst) {
		if name, ok := s.names.name(dst); ok {
			return s.judgeName(name, port)
		}
	}
	return s.judgeAddr(dst, port)
}

// judgeName decides a connection to the host a command asked for by
// name: its deny patterns, then (allowlist) its allow patterns, the
// session's answers and a question, then every address it resolves to
// now, each of which must be one a connection by number could reach.
func (s *Session) judgeName(name string, port int) verdict {
	v := verdict{host: name}
	if p, ok := s.rules.DenyName(name, port); ok {
		v.reason = netpolicy.DeniedBy(p)
		return v
	}
	if s.rules.Policy.Mode == netpolicy.Allowlist && !s.rules.AllowName(name, port) {
		if v.reason = s.mayAsk(name, port); v.reason != "" {
			return v
		}
	}
	addrs, err := s.latest(name)
	if err != nil {
		s.debug("egress: resolve", "name", name, "error", err)
		return v // not a denial: the name does not resolve now
	}
	for _, a := range addrs {
		if r := s.addrRefused(a, port); r != "" {
			if v.reason == "" || r == ReasonOwnServer {
				v.reason = r
			}
			continue
		}
		v.addrs = append(v.addrs, a)
	}
	if len(v.addrs) > 0 {
		v.reason = ""
	}
	return v
}

// judgeAddr decides a connection to an address no name stands for.
func (s *Session) judgeAddr(a netip.Addr, port int) verdict {
	v := verdict{host: a.String()}
	if v.reason = s.addrRefused(a, port); v.reason != "" {
		return v
	}
	if s.rules.Policy.Mode == netpolicy.Allowlist && !s.rules.AllowAddr(a, port) && !s.rules.Local(a, port) {
		if v.reason = s.mayAsk(v.host, port); v.reason != "" {
			return v
		}
	}
	v.addrs = []netip.Addr{a}
	return v
}

// addrRefused is why a on port may not be reached whatever the mode
// ("" when it may): conch's own server, a deny pattern, an address that
// is not public and that allow_local does not name.
func (s *Session) addrRefused(a netip.Addr, port int) string {
	a = a.Unmap()
	if s.own(a, port) {
		return ReasonOwnServer
	}
	if p, ok := s.rules.DenyAddr(a, port); ok {
		return netpolicy.DeniedBy(p)
	}
	if poolPrefix.Contains(a) {
		return netpolicy.ReasonPrivate
	}
	return s.rules.Refused(a, port, s.hostAddrs.has)
}

// own reports whether a:port is one of conch's own listeners.
func (s *Session) own(a netip.Addr, port int) bool {
	for _, o := range s.rules.Policy.Own {
		if int(o.Port()) != port {
			continue
		}
		oa := o.Addr().Unmap()
		if oa == a || oa.IsUnspecified() && (a.IsLoopback() || a.IsUnspecified() || s.hostAddrs.has(a)) {
			return true
		}
	}
	return false
}

// mayAsk decides a destination allowlist does not name: allowed ("")
// when the user allowed host for the session or says yes now, else the
// reason it is refused.
func (s *Session) mayAsk(host string, port int) string {
	s.mu.Lock()
	granted, declined := s.granted[host], s.declined[host]
	s.mu.Unlock()
	var asker shell.NetworkAsker
	if s.opts.Asker != nil {
		asker = s.opts.Asker()
	}
	switch {
	case granted:
		return ""
	case declined:
		return netpolicy.ReasonDeclined
	case !s.rules.Policy.Asks() || asker == nil:
		return netpolicy.ReasonNotAllowed
	}
	a, err := s.ask(asker, host, port)
	switch {
	case err != nil:
		return netpolicy.ReasonDeclined
	case a == shell.NetworkAllowOnce:
		return ""
	case a == shell.NetworkAllowSession:
		s.mu.Lock()
		s.granted[host] = true
		s.mu.Unlock()
		return ""
	}
	s.mu.Lock()
	s.declined[host] = true
	s.mu.Unlock()
	return netpolicy.ReasonDeclined
}

// ask asks about host:port once for every connection waiting on it.
func (s *Session) ask(asker shell.NetworkAsker, host string, port int) (shell.NetworkAnswer, error) {
	key := net.JoinHostPort(host, strconv.Itoa(port))
	s.mu.Lock()
	q := s.asking[key]
	first := q == nil
	if first {
		q = &question{done: make(chan struct{})}
		s.asking[key] = q
	}
	s.mu.Unlock()
	if first {
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.AskTimeout)
		q.a, q.err = asker.AskNetwork(ctx, host, port)
		cancel()
		s.mu.Lock()
		delete(s.asking, key)
		s.mu.Unlock()
		close(q.done)
	}
	select {
	case <-q.done:
		return q.a, q.err
	case <-s.ctx.Done():
		return shell.NetworkDeny, errClosed
	}
}

// resolve returns what name resolves to now, and keeps it as the name's
// latest answer.
func (s *Session) resolve(name string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	addrs, err := s.res.LookupNetIP(ctx, "ip", name)
	s.mu.Lock()
	s.cache[name] = resolved{addrs: addrs, err: err, at: time.Now()}
	s.mu.Unlock()
	return addrs, err
}

// latest returns the server's latest answer for name when it is younger
// than answerAge (a command's query looked it up just before it
// connected), else looks it up again. Every address is checked again
// when it is dialled, so an answer that changed since (rebinding) is
// refused there.
func (s *Session) latest(name string) ([]netip.Addr, error) {
	s.mu.Lock()
	r, ok := s.cache[name]
	s.mu.Unlock()
	if ok && time.Since(r.at) < answerAge {
		return r.addrs, r.err
	}
	return s.resolve(name)
}

// answerAge is how long the server reuses a name's answer for the
// connections that follow a command's query.
const answerAge = 30 * time.Second

// exists looks name up again (a command asked for it) and reports
// whether it resolves.
func (s *Session) exists(name string) (bool, error) {
	_, err := s.resolve(name)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return false, nil
	}
	return err == nil, err
}

// dial connects to one of v's addresses on port, in order, each checked
// again as the socket connects (nothing may reach what the policy
// refused, whatever the resolver said meanwhile).
func (s *Session) dial(network string, v verdict, port int) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if r := s.addrRefused(ap.Addr(), int(ap.Port())); r != "" {
			return errors.New("egress: refused: " + r)
		}
		return nil
	}}
	var errs []error
	for _, a := range v.addrs {
		c, err := d.DialContext(s.ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// hostAddrs are the host's own addresses (its interfaces'), read again
// at most once a second.
type hostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs map[netip.Addr]bool
}

func (h *hostAddrs) has(a netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) > time.Second {
		h.addrs = map[netip.Addr]bool{}
		if ifas, err := net.InterfaceAddrs(); err == nil {
			for _, ifa := range ifas {
				if p, err := netip.ParsePrefix(ifa.String()); err == nil {
					h.addrs[p.Addr().Unmap()] = true
				}
			}
		}
		h.at = time.Now()
	}
	return h.addrs[a.Unmap()]
}
