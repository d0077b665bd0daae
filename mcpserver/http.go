package mcpserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
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
// for) a request without the bearer token, on loopback too, and every
// request when Options.Token is empty (401); one that arrived on a
// loopback address with a Host header that does not name a loopback host
// (403, against DNS rebinding); and a cross-origin browser request (403,
// http.CrossOriginProtection). A POST body must arrive within
// Options.BodyTimeout (else 408) and hold at most 4 MiB (else 413).
//
// Every error answer to a POST is a JSON-RPC error, to the request's id
// when it is known (else null), with the reason in its data: -32601 with
// status 200 for a method the server does not know; otherwise the HTTP
// status of the refusal, with -32700 for a body that is not JSON and
// -32600 for the rest.
func (s *Server) HTTPHandler() http.Handler {
	s.httpOnce.Do(func() { s.httpMCP = s.newMCP(s.httpSession) })
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.httpMCP },
		&mcp.StreamableHTTPOptions{Logger: s.sdkLog(), MaxRequestBodyBytes: maxBody})
	return s.withMetrics(jsonrpcErrors(s.guard(http.NewCrossOriginProtection().Handler(s.watchHTTP(sdk)))))
}

// maxBody is the largest POST body conch reads, the SDK's default.
const maxBody = mcp.DefaultMaxRequestBodyBytes

// guard checks the token and the Host header.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, ok := s.authorized(r)
		if !ok {
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
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, client)))
	})
}

// authorized: the request carries the bearer token or a named client's
// (then client is its name; "" for the single token). Without a token
// nothing is: loopback does not separate the users of one machine.
func (s *Server) authorized(r *http.Request) (client string, ok bool) {
	auth := r.Header.Get("Authorization")
	const scheme = "Bearer "
	if len(auth) < len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) {
		return "", false
	}
	got := []byte(auth[len(scheme):])
	// Every token is compared, whichever matches: the time taken says
	// nothing about which.
	match := false
	if s.opts.Token != "" && subtle.ConstantTimeCompare(got, []byte(s.opts.Token)) == 1 {
		match = true
	}
	for _, c := range s.opts.Clients {
		if c.Token != "" && subtle.ConstantTimeCompare(got, []byte(c.Token)) == 1 && !match {
			client, match = c.Name, true
		}
	}
	return client, match
}

// clientKey is the context key of the name of the HTTP client a request
// comes from ("" for the single token).
type clientKey struct{}

func clientOf(ctx context.Context) string {
	name, _ := ctx.Value(clientKey{}).(string)
	return name
}

// protocolHeader names the protocol revision of a streamable HTTP
// request.
const protocolHeader = "Mcp-Protocol-Version"

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

// watchHTTP follows each session's HTTP activity, for the idle timeout
// and the keep-alive; cancels a session's calls as soon as the client asks
// to delete it (the SDK would wait for them first); reads POST bodies
// within the body timeout; and drops the response to a call that the
// client cancelled while it ran.
func (s *Server) watchHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Method == http.MethodPost {
			var ok bool
			if body, ok = s.readBody(w, r); !ok {
				return
			}
		}
		req := request(body)
		if ew, ok := w.(*errorWriter); ok && req != nil {
			ew.id = req.ID // guard and the cross-origin check pass w on as is
		}
		sid := r.Header.Get(sessionIDHeader)
		if sid == "" && r.Header.Get(protocolHeader) >= statelessVersion {
			// 2026-07-28: no session; the client is the owner.
			o, err := s.ownerHTTP(clientOf(r.Context()))
			if err != nil {
				http.Error(w, "server closing", http.StatusServiceUnavailable)
				return
			}
			o.handler.ServeHTTP(w, r)
			return
		}
		x := s.lookupHTTP(sid)
		if x == nil {
			next.ServeHTTP(w, r)
			return
		}
		if x.client != clientOf(r.Context()) {
			// Another client's session: as if unknown.
			http.Error(w, "session not found", http.StatusNotFound)
			s.log.Warn("http request refused: another client's session", "remote", r.RemoteAddr, "session", x.id)
			return
		}
		if r.Method == http.MethodDelete {
			x.deleting()
			if deleteDelay > 0 {
				time.Sleep(deleteDelay) // a test's loaded machine
			}
			next.ServeHTTP(w, r)
			x.end(reasonDeleted)
			return
		}
		if req != nil {
			x.httpCalls.saw(req, r.Context().Done())
			if req.IsCall() {
				defer x.httpCalls.done(req.ID)
				w = &quietWriter{ResponseWriter: w, id: req.ID, calls: &x.httpCalls}
			}
		}
		stream := r.Method == http.MethodGet
		x.busy(stream)
		defer x.unbusy(stream)
		next.ServeHTTP(w, r)
	})
}

// deleteDelay delays the SDK's answer to a DELETE, for a test.
var deleteDelay time.Duration

// readBody reads r's body, at most maxBody bytes within the body timeout,
// and puts it back for the SDK. It answers a body that is too slow, too
// large or not JSON itself, and then reports false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err == nil {
		rc.SetReadDeadline(time.Time{}) // the answer may take as long as the call
	} else {
		// The rest of the body is not worth waiting for: the expired
		// deadline stops the server from reading it, and the connection
		// goes.
		w.Header().Set("Connection", "close")
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "request body exceeds "+strconv.FormatInt(maxBody, 10)+" bytes", http.StatusRequestEntityTooLarge)
	case errors.Is(err, os.ErrDeadlineExceeded):
		http.Error(w, "request body not received within "+s.opts.BodyTimeout.String(), http.StatusRequestTimeout)
		s.log.Warn("http request refused: slow body", "remote", r.RemoteAddr)
	case err != nil:
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
	case !json.Valid(body):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(parseError())
	default:
		r.Body = io.NopCloser(bytes.NewReader(body))
		return body, true
	}
	return nil, false
}

// request is the JSON-RPC request or notification body holds, or nil.
func request(body []byte) *jsonrpc.Request {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil
	}
	m, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil
	}
	req, _ := m.(*jsonrpc.Request)
	return req
}

// quietWriter is the ResponseWriter of a POST that carries call id: it
// drops the event (or JSON body) that answers the call if the client
// cancelled it while it ran. The SDK writes each event in one Write.
type quietWriter struct {
	http.ResponseWriter
	id    jsonrpc.ID
	calls *inflight
}

func (q *quietWriter) Write(p []byte) (int, error) {
	if q.calls.cancelled(q.id) && answers(p, q.id) {
		return len(p), nil
	}
	return q.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (to flush).
func (q *quietWriter) Unwrap() http.ResponseWriter { return q.ResponseWriter }

// answers reports whether p, one server-sent event or a JSON body, is the
// response to call id.
func answers(p []byte, id jsonrpc.ID) bool {
	data := p
	if len(p) > 0 && p[0] != '{' {
		_, after, ok := bytes.Cut(p, []byte("data: "))
		if !ok {
			return false
		}
		data, _, _ = bytes.Cut(after, []byte("\n"))
	}
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return false
	}
	resp, ok := m.(*jsonrpc.Response)
	return ok && resp.ID == id
}

// jsonrpcErrors turns the plain-text error answers to a POST (the
// guard's, the cross-origin check's, the SDK's) into JSON-RPC errors with
// the same status: a client that sent JSON-RPC gets JSON-RPC back.
func jsonrpcErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		if ew.status != 0 { // an error without a text
			ew.Write(nil)
		}
	})
}

// notHandled starts the SDK's plain-text answer to a method it does not
// know (before protocol 2026-07-28, which answers -32601 itself).
const notHandled = "JSON RPC not handled"

// errorWriter rewrites a plain-text error answer as a JSON-RPC error: to
// the request's id when it is known, else to a null id. A method the
// server does not know gets -32601 with status 200, so that the client
// hands the error to the caller of the method rather than failing the
// transport; the rest get -32600 with their status.
type errorWriter struct {
	http.ResponseWriter
	id     jsonrpc.ID // the request's, once known
	status int        // a plain-text error's, held until its text comes
}

func (e *errorWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(e.Header().Get("Content-Type"), "text/plain") {
		e.status = code
		return
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *errorWriter) Write(p []byte) (int, error) {
	if e.status == 0 {
		return e.ResponseWriter.Write(p)
	}
	status := e.status
	e.status = 0
	reason := strings.TrimSpace(string(p))
	code, message := int64(jsonrpc.CodeInvalidRequest), msgInvalidRequest
	if strings.HasPrefix(reason, notHandled) && e.id.IsValid() {
		code, message, status = jsonrpc.CodeMethodNotFound, msgMethodNotFound, http.StatusOK
	}
	body := errorReply(code, message, reason)
	if e.id.IsValid() {
		je := &jsonrpc.Error{Code: code, Message: message}
		je.Data, _ = json.Marshal(reason)
		body, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: e.id, Error: je})
	}
	h := e.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	e.ResponseWriter.WriteHeader(status)
	_, err := e.ResponseWriter.Write(append(body, '\n'))
	return len(p), err
}

func (e *errorWriter) Unwrap() http.ResponseWriter { return e.ResponseWriter }

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
func (s *Server) httpSession(ctx context.Context, ss *mcp.ServerSession) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x := s.byMCP[ss]; x != nil {
		return x, nil
	}
	x, err := s.newSessionLocked("http-" + strconv.Itoa(s.nextHTTP+1))
	if err != nil {
		return nil, err
	}
	// The request that opens the session names its client: the
	// session is that client's alone.
	x.client = clientOf(ctx)
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
