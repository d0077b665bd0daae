package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves HTTPHandler on ln until ctx is done, then closes every
// connection and returns nil (the Server itself stays open: Close it to
// end the sessions). It holds at most Options.MaxConns connections at
// once, cutting one that sends no request (or sends its headers too
// slowly) to make room for a newcomer (see connLimiter), and applies the
// header and idle timeouts. It returns the error of a listener that
// fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           track(s.HTTPHandler()),
		ConnContext:       connContext,
		ConnState:         connState,
		ReadHeaderTimeout: s.opts.HeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// No ReadTimeout or WriteTimeout: a tool call's answer and the
		// event stream may take as long as the command runs. The body
		// timeout is the handler's.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	// A connection that sent nothing, or sits idle, may be cut for a
	// newcomer after half a second (a remote client's request arrives a
	// round trip after its connection), or its header timeout if that
	// is shorter.
	grace := min(time.Second/2, s.opts.HeaderTimeout)
	go func() { errc <- hs.Serve(newConnLimiter(ln, s.opts.MaxConns, grace, s.log)) }()
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
