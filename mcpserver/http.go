package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// keepAliveFailures is how many failed pings in a row end a session: one
// may be a client reconnecting its event stream.
const keepAliveFailures = 2

// HTTPHandler returns the streamable HTTP transport: every Mcp-Session-Id
// is its own session. Mount it where clients are told to connect (conch
// serve mounts it on every path; /mcp is the conventional one).
//
// Before the SDK sees a request, the handler refuses (and runs nothing
// for) a request without the bearer token when Options.Token is set, or
// one that arrived on or came from a non-loopback address when it is not
// (401); one that arrived on a loopback address with a Host header that
// does not name a loopback host (403, against DNS rebinding); and a
// cross-origin browser request (403, http.CrossOriginProtection).
func (s *Server) HTTPHandler() http.Handler {
	s.httpOnce.Do(func() { s.httpMCP = s.newMCP(s.httpSession) })
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.httpMCP },
		&mcp.StreamableHTTPOptions{Logger: s.sdkLog()})
	return s.guard(http.NewCrossOriginProtection().Handler(s.watchHTTP(sdk)))
}

// guard checks the token and the Host header.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="conch"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			s.log.Warn("http request refused: unauthorized", "remote", r.RemoteAddr, "method", r.Method)
			return
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil &&
			loopbackAddr(la.String()) && !loopbackHost(r.Host) {
			http.Error(w, "forbidden: Host "+strconv.Quote(r.Host)+" is not a loopback name", http.StatusForbidden)
			s.log.Warn("http request refused: bad Host", "remote", r.RemoteAddr, "host", r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized: the bearer token when one is set; else loopback only.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token != "" {
		auth := r.Header.Get("Authorization")
		const scheme = "Bearer "
		if len(auth) < len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) {
			return false
		}
		return subtle.ConstantTimeCompare([]byte(auth[len(scheme):]), []byte(s.opts.Token)) == 1
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && isIPAddr(la.String()) && !loopbackAddr(la.String()) {
		return false
	}
	// A RemoteAddr that is not ip:port (a unix socket) is local.
	return !isIPAddr(r.RemoteAddr) || loopbackAddr(r.RemoteAddr)
}

func isIPAddr(hostport string) bool {
	_, err := netip.ParseAddrPort(hostport)
	return err == nil
}

// loopbackAddr reports whether an ip:port is a loopback address.
func loopbackAddr(hostport string) bool {
	ap, err := netip.ParseAddrPort(hostport)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback IP, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// LoopbackAddr reports whether a listen address (host:port) binds only
// loopback interfaces: localhost or a loopback IP. An empty host (all
// interfaces) is not loopback.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return loopbackHost(host)
}

// watchHTTP follows each session's HTTP activity, for the idle timeout
// and the keep-alive, and cancels a session's calls as soon as the client
// asks to delete it (the SDK would wait for them first).
func (s *Server) watchHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := s.lookupHTTP(r.Header.Get(sessionIDHeader))
		if x == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodDelete {
			x.end("client deleted the session")
			next.ServeHTTP(w, r)
			return
		}
		stream := r.Method == http.MethodGet
		x.busy(stream)
		defer x.unbusy(stream)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) lookupHTTP(id string) *session {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byHTTPID[id]
}

// httpSession is the resolver of HTTP sessions: it registers an SDK
// session on first sight and starts what watches it.
func (s *Server) httpSession(ss *mcp.ServerSession) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x := s.byMCP[ss]; x != nil {
		return x, nil
	}
	x, err := s.newSessionLocked("http-" + strconv.Itoa(s.nextHTTP+1))
	if err != nil {
		return nil, err
	}
	s.nextHTTP++
	s.byMCP[ss] = x
	if id := ss.ID(); id != "" {
		s.byHTTPID[id] = x
	}
	s.log.Info("session started", "session", x.id, "transport", "http")
	x.armIdle(s.opts.SessionTimeout)

	// The SDK session ends on DELETE (or when we close it): then its
	// tasks go.
	go func() {
		ss.Wait()
		s.finish(x)
	}()
	// Our reasons to end it (idle, keep-alive, Close) close the SDK
	// session once its calls are cancelled.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-x.ctx.Done()
		ss.Close()
	}()
	if s.opts.KeepAlive > 0 {
		s.wg.Add(1)
		go s.keepAlive(x, ss)
	}
	return x, nil
}

// armIdle starts the idle timer of an HTTP session.
func (x *session) armIdle(timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.idleSince = time.Now()
	x.idle = time.AfterFunc(timeout, func() { x.checkIdle(timeout) })
}

func (x *session) checkIdle(timeout time.Duration) {
	x.mu.Lock()
	if x.ended || x.active > 0 {
		x.mu.Unlock()
		return
	}
	if left := timeout - time.Since(x.idleSince); left > 0 {
		x.idle.Reset(left)
		x.mu.Unlock()
		return
	}
	x.mu.Unlock()
	x.end("idle timeout")
}

// busy and unbusy bracket an HTTP request of the session; stream marks
// the event stream (GET).
func (x *session) busy(stream bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.active++
	x.lastActive = time.Now()
	if stream {
		x.listening++
		x.listened = true
	}
}

func (x *session) unbusy(stream bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.active--
	x.lastActive = time.Now()
	if stream {
		x.listening--
	}
	if x.active == 0 {
		x.idleSince = time.Now()
		if x.idle != nil && !x.ended {
			x.idle.Reset(time.Until(x.idleSince.Add(x.srv.opts.SessionTimeout)))
		}
	}
}

// reach tells how the keep-alive can reach x now: by a ping on its open
// event stream (listening); or not at all, and then whether it has
// shown it is alive within the last interval (a request in flight, or
// one that started or ended) or never held a stream (then the idle
// timeout alone watches it).
func (x *session) reach(interval time.Duration) (listening, alive bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.listening > 0 {
		return true, true
	}
	return false, !x.listened || x.active > 0 || time.Since(x.lastActive) < interval
}

// keepAlive pings a session while it holds an event stream;
// keepAliveFailures failed pings in a row end the session. A client that
// held a stream and lost it cannot be pinged: an interval in which it
// neither re-opened a stream nor sent any request counts as a failed
// ping (a live client re-opens its stream; a client that left, by a
// close without DELETE or by dying, does neither). A client that never
// opened a stream is left to the idle timeout.
func (s *Server) keepAlive(x *session, ss *mcp.ServerSession) {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.KeepAlive)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-x.ctx.Done():
			return
		case <-tick.C:
		}
		if listening, alive := x.reach(s.opts.KeepAlive); !listening {
			if alive {
				failures = 0
				continue
			}
			failures++
			s.log.Info("client without its event stream and silent", "session", x.id, "failures", failures)
			if failures >= keepAliveFailures {
				x.end("client left: its event stream is gone and it sent nothing")
				return
			}
			continue
		}
		ctx, cancel := context.WithTimeout(x.ctx, s.opts.KeepAlive/2)
		err := ss.Ping(ctx, nil)
		cancel()
		if err == nil {
			failures = 0
			continue
		}
		if x.ctx.Err() != nil {
			return
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeMethodNotFound {
			return // a client that does not answer pings: nothing to learn
		}
		failures++
		s.log.Warn("keep-alive ping failed", "session", x.id, "failures", failures, "error", err)
		if failures >= keepAliveFailures {
			x.end("client stopped answering pings")
			return
		}
	}
}
