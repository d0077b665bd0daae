package mcpserver

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one session over MCP's stdio transport: requests are
// read from in and responses written to out, as newline-delimited JSON.
// Nothing else may write to out.
//
// It returns nil when in ends (EOF or a read error), when ctx is done, or
// when the Server closes; in every case the session's running calls are
// cancelled at once, its background tasks are disposed of, and in is
// closed if it is an io.Closer (out is never closed). It returns ErrClosed
// after Close, or the error of a failed connection.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	x, err := s.newSession("stdio")
	if err != nil {
		return err
	}
	defer s.finish(x)
	srv := s.newMCP(func(*mcp.ServerSession) (*session, error) { return x, nil })
	inputEnded := make(chan struct{})
	r := &watchedReader{r: in, onEnd: func() {
		close(inputEnded)
		x.end("input closed")
	}}
	// The connection's lifetime is ours to end: ctx is watched below.
	ss, err := srv.Connect(context.WithoutCancel(ctx), &mcp.IOTransport{Reader: r, Writer: nopWriteCloser{out}}, nil)
	if err != nil {
		return err
	}
	s.log.Info("session started", "session", x.id, "transport", "stdio")
	waited := make(chan struct{})
	go func() {
		ss.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-inputEnded:
		// The SDK answers what it has read (the calls are cancelled)
		// and then ends the connection.
	case <-x.ctx.Done(): // Close, or the input ended
	case <-ctx.Done():
		x.end("shutting down")
	}
	select {
	case <-inputEnded:
	default:
		ss.Close()
	}
	<-waited
	return nil
}

// watchedReader calls onEnd once, on the first read error (EOF included),
// before the SDK sees it: the session's calls are cancelled at once.
type watchedReader struct {
	r     io.Reader
	once  sync.Once
	onEnd func()
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err != nil {
		w.once.Do(w.onEnd)
	}
	return n, err
}

func (w *watchedReader) Close() error {
	if c, ok := w.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
