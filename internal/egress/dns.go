//go:build linux

package egress

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/conch-dev/conch/internal/netpolicy"
)

// dnsTTL is the time to live of the session resolver's answers: the
// address that stands for a name does not change within the session.
const dnsTTL = 60

// serveDNSPackets answers the queries of one UDP flow until it is idle.
func (s *Session) serveDNSPackets(c net.Conn) {
	buf := make([]byte, 1500)
	for {
		c.SetReadDeadline(time.Now().Add(dnsIdle))
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if out := s.answer(buf[:n], 512); out != nil {
			c.Write(out)
		}
	}
}

// serveDNSStream answers the queries of one TCP connection (each
// preceded by its length) until it ends.
func (s *Session) serveDNSStream(c net.Conn) {
	for {
		c.SetReadDeadline(time.Now().Add(dnsIdle))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		out := s.answer(q, 65535)
		if out == nil {
			return
		}
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(out)))); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer answers one query (nil: no answer). A name gets an address of
// the session's pool that stands for it (A), no IPv6 address (AAAA: the
// namespace reaches the network over IPv4; the server dials either), and
// nothing else. The server looks a name up first, so that a name that
// does not exist is answered NXDOMAIN, except for a name the policy
// refuses whatever the port or, in allowlist mode, one it does not list:
// its query goes no further than conch (nothing leaves through a lookup
// of a name the commands may not reach), and the connection is refused
// or asked about by name. An address of the pool gets its name back
// (PTR).
func (s *Session) answer(query []byte, limit int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: true}
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return build(rh, q, nil, limit)
	}
	name := netpolicy.CanonicalName(q.Name.String())
	if q.Class != dnsmessage.ClassINET {
		return build(rh, q, nil, limit)
	}
	if q.Type == dnsmessage.TypePTR {
		return s.answerPTR(rh, q, name, limit)
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// The session's own loopback, as the host's resolver says.
		if q.Type == dnsmessage.TypeA {
			return build(rh, q, &dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}}, limit)
		}
		return build(rh, q, nil, limit)
	}
	if !s.lookupFirst(name) {
		// Answered without a lookup.
	} else if ok, err := s.exists(name); err != nil && !ok {
		rh.RCode = dnsmessage.RCodeServerFailure
		return build(rh, q, nil, limit)
	} else if !ok {
		rh.RCode = dnsmessage.RCodeNameError
		return build(rh, q, nil, limit)
	}
	if q.Type != dnsmessage.TypeA {
		return build(rh, q, nil, limit)
	}
	return build(rh, q, &dnsmessage.AResource{A: s.names.addr(name).As4()}, limit)
}

// lookupFirst reports whether a query for name is looked up before it is
// answered: not for a name the policy refuses on every port, nor, in
// allowlist mode, for one allow does not name and the session was not
// allowed (a query is then all a command could send out).
func (s *Session) lookupFirst(name string) bool {
	if _, ok := s.rules.DenyName(name, 0); ok {
		return false
	}
	if s.rules.Policy.Mode != netpolicy.Allowlist || s.rules.AllowName(name, 0) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted[name]
}

func (s *Session) answerPTR(rh dnsmessage.Header, q dnsmessage.Question, name string, limit int) []byte {
	labels := strings.Split(strings.TrimSuffix(name, ".in-addr.arpa"), ".")
	if len(labels) == 4 && strings.HasSuffix(name, ".in-addr.arpa") {
		rev := labels[3] + "." + labels[2] + "." + labels[1] + "." + labels[0]
		if a, err := parseAddr(rev); err == nil {
			if host, ok := s.names.name(a); ok {
				n, err := dnsmessage.NewName(host + ".")
				if err == nil {
					return build(rh, q, &dnsmessage.PTRResource{PTR: n}, limit)
				}
			}
		}
	}
	rh.RCode = dnsmessage.RCodeNameError
	return build(rh, q, nil, limit)
}

// build writes a response with at most one answer, truncated (TC, no
// answer) past limit.
func build(h dnsmessage.Header, q dnsmessage.Question, body dnsmessage.ResourceBody, limit int) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
	switch r := body.(type) {
	case *dnsmessage.AResource:
		if b.AResource(rh, *r) != nil {
			return nil
		}
	case *dnsmessage.PTRResource:
		if b.PTRResource(rh, *r) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	if len(out) > limit {
		h.Truncated = true
		return build(h, q, nil, 1<<16)
	}
	return out
}
