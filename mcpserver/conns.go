package mcpserver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter is a listener that holds at most n accepted connections
// open at once, so that slow or flooding clients cannot exhaust the
// server's descriptors, without letting them lock out everyone else.
//
// A slowloris opens connections and sends its request headers a byte at
// a time: each connection held its place until the header timeout, and
// with more of them than places a legitimate client waited in the
// kernel's backlog until one timed out (10 s; issue 19 item 16). So when
// every place is taken and a client connects, one connection without a
// request in a handler gives up its place, the first of:
//
//  1. one that sent part of a request's headers and not their end (a
//     legitimate client sends them whole), the oldest first;
//  2. one that has sent nothing for grace since it was accepted (and
//     has nothing waiting to be read: a busy server reads late);
//  3. one idle between requests for grace.
//
// A connection whose request is in a handler (a tool call, an event
// stream, a body being read) is never cut, nor one whose headers arrived
// whole; when no connection may be cut, the newcomer waits until a place
// frees or one may, holding only its own descriptor.
//
// Serve wires it: ConnContext puts each connection in its requests'
// context, the handler marks the time a request spends in it (track),
// and ConnState says when a connection is idle.
type connLimiter struct {
	net.Listener
	n     int
	grace time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	conns  map[*limitedConn]struct{}
	wake   chan struct{} // a place was freed, or a connection read a request's first bytes (buffered, 1)
	closed chan struct{}
	once   sync.Once
}

func newConnLimiter(ln net.Listener, n int, grace time.Duration, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, n: n, grace: grace, log: log, conns: map[*limitedConn]struct{}{},
		wake: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Accept accepts the next connection and makes room for it (see
// connLimiter). It returns net.ErrClosed once the listener is closed.
func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		l.mu.Lock()
		if len(l.conns) < l.n {
			lc := &limitedConn{Conn: c, l: l, since: now}
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		}
		victim, why, wait := l.victimLocked(now)
		l.mu.Unlock()
		if victim != nil {
			l.log.Debug("http connection cut to make room", "remote", victim.RemoteAddr().String(), "why", why)
			victim.Close() // frees its place at once
			continue
		}
		var ripe <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			ripe = timer.C
		}
		select {
		case <-l.wake:
		case <-ripe:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// victimLocked is the connection to cut for a newcomer at now (see
// connLimiter) and why, or nil and how long until one may be cut (0: not
// until a place frees).
func (l *connLimiter) victimLocked(now time.Time) (victim *limitedConn, why string, wait time.Duration) {
	rank := 4
	for c := range l.conns {
		if c.busy > 0 {
			continue
		}
		// readAny before headersDone: Read sets them the other way
		// round, so a connection whose one read brought its whole
		// headers is never seen as having sent a part of them.
		readAny := c.readAny.Load()
		r := 1
		switch {
		case c.idle:
			r = 3
		case c.headersDone.Load():
			continue // its handler is about to start
		case !readAny:
			r = 2
		}
		if r > 1 {
			if left := c.since.Add(l.grace).Sub(now); left > 0 {
				if wait == 0 || left < wait {
					wait = left
				}
				continue
			}
			if r == 2 && c.pending() {
				continue // it did send: the server has not read it yet
			}
		}
		if r < rank || r == rank && c.since.Before(victim.since) {
			victim, rank = c, r
		}
	}
	if victim != nil {
		wait = 0
		why = [...]string{1: "part of its headers", 2: "nothing sent", 3: "idle"}[rank]
	}
	return victim, why, wait
}

func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// release forgets c, freeing its place.
func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	l.poke()
}

// poke wakes an Accept waiting for a place.
func (l *connLimiter) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// limitedConn is an accepted connection holding a place of its
// connLimiter. busy, idle and since are guarded by the limiter's mu.
type limitedConn struct {
	net.Conn
	l         *connLimiter
	busy      int       // requests of this connection in a handler
	idle      bool      // between requests of a keep-alive connection
	since     time.Time // accepted, or its last request left its handler
	closeOnce sync.Once

	// What the server read of the request it awaits: anything, and the
	// end of its headers (an empty line). scan guards the scanner.
	readAny, headersDone atomic.Bool
	scan                 sync.Mutex
	lineLen              int  // bytes of the current line, but \r
	sawLine              bool // a line ended: the next empty one ends the headers
}

func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.headersDone.Load() {
		c.scan.Lock()
		for _, b := range p[:n] {
			switch b {
			case '\r':
			case '\n':
				if c.lineLen == 0 && c.sawLine {
					c.headersDone.Store(true)
				}
				c.sawLine = c.sawLine || c.lineLen > 0
				c.lineLen = 0
			default:
				c.lineLen++
			}
		}
		c.scan.Unlock()
		// After headersDone: who sees readAny set sees whether these
		// bytes ended the headers (see victimLocked).
		if !c.readAny.Swap(true) {
			c.l.poke() // it may be cut now, if it sends too little
		}
	}
	return n, err
}

// awaitRequest starts the scan of the connection's next request.
func (c *limitedConn) awaitRequest() {
	c.scan.Lock()
	c.lineLen, c.sawLine = 0, false
	c.readAny.Store(false) // first: a connection between requests has sent nothing
	c.headersDone.Store(false)
	c.scan.Unlock()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.l.release(c) })
	return err
}

// connKey is the context key of a request's limitedConn.
type connKey struct{}

// connContext is http.Server.ConnContext: a request's context carries
// its connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// connState is http.Server.ConnState: it notes when a connection is idle
// between requests, and when it leaves that state.
func connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	lc.l.mu.Lock()
	defer lc.l.mu.Unlock()
	switch state {
	case http.StateIdle:
		lc.idle, lc.since = true, time.Now()
	case http.StateActive:
		lc.idle = false
	}
}

// track marks the time each request spends in next as busy for its
// connection, which is then never cut for a newcomer; when it leaves,
// the connection awaits its next request.
func track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := r.Context().Value(connKey{}).(*limitedConn)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		lc.l.mu.Lock()
		lc.busy++
		lc.l.mu.Unlock()
		defer func() {
			lc.awaitRequest()
			lc.l.mu.Lock()
			lc.busy--
			lc.since = time.Now()
			lc.l.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}
