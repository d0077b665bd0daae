package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// Serve serves HTTPHandler on ln until ctx is done, then closes every
// connection and returns nil (the Server itself stays open: Close it to
// end the sessions). It holds at most Options.MaxConns connections at
// once and applies the header and idle timeouts. It returns the error of
// a listener that fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.HTTPHandler(),
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// No ReadTimeout or WriteTimeout: a tool call's answer and the
		// event stream may take as long as the command runs. The body
		// timeout is the handler's.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limitListener(ln, s.opts.MaxConns)) }()
	select {
	case <-ctx.Done():
		// Close, not Shutdown: event streams never go idle. Calls in
		// flight are cancelled by the Server's Close.
		hs.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// limitListener returns a listener that holds at most n accepted
// connections open at once: Accept waits until one closes, and the
// clients beyond n wait in the kernel's backlog, costing no descriptor.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	closeOnce sync.Once
	closed    chan struct{}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
