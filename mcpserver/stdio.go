package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/syncio"
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
	srv := s.newMCP(func(context.Context, *mcp.ServerSession) (*session, error) { return x, nil })
	inputEnded := make(chan struct{})
	w := &syncio.Writer{W: out} // the SDK and the input filter both write
	r := &watchedReader{r: newLineFilter(in, w), src: in, onEnd: func() {
		close(inputEnded)
		x.end("input closed")
	}}
	// The connection's lifetime is ours to end: ctx is watched below. The
	// filter bounds every line, so the SDK's own cap is off.
	tr := &mcp.IOTransport{Reader: r, Writer: nopWriteCloser{w}, MaxLineLength: -1}
	ss, err := srv.Connect(context.WithoutCancel(ctx), quietCancel{tr}, nil)
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
// before the SDK sees it: the session's calls are cancelled at once. Its
// Close closes src, the original input, if that is an io.Closer.
type watchedReader struct {
	r     io.Reader
	src   io.Reader
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
	if c, ok := w.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// maxLine is the longest stdio line conch reads, its newline aside.
const maxLine = 16 << 20

// lineFilter reads newline-delimited JSON-RPC and passes on only the
// lines that are one JSON-RPC 2.0 message each (blank lines are skipped):
// the SDK ends the whole session, silently, on any other line. It
// answers the others itself on out, with a null id, and reads on: a line
// that is not JSON gets -32700 (Parse error); a JSON value that is not a
// JSON-RPC message, and a batch array (which MCP no longer has), get
// -32600 (Invalid Request); so does a line over maxLine bytes, which is
// discarded as it streams in rather than held. A last line without a
// newline counts as a line.
type lineFilter struct {
	in      *bufio.Reader
	out     io.Writer
	line    []byte // the line being read, reused
	pending []byte // what the SDK has yet to read of a passed line
	err     error  // the input's error, once the last line is out
}

func newLineFilter(in io.Reader, out io.Writer) *lineFilter {
	return &lineFilter{in: bufio.NewReaderSize(in, 64<<10), out: out}
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		// A buffer grown by a huge message is not kept for small ones.
		if cap(f.line) > 1<<20 {
			f.line = nil
		}
		tooLong := f.readLine()
		if tooLong {
			if _, err := f.out.Write(refusedLong()); err != nil {
				return 0, fmt.Errorf("stdio: answer an over-long line: %w", err)
			}
			continue
		}
		if reply := check(f.line); reply != nil {
			if _, err := f.out.Write(reply); err != nil {
				return 0, fmt.Errorf("stdio: answer a bad line: %w", err)
			}
			continue
		}
		// Without the blanks around it: the SDK takes a blank after the
		// value for trailing data, and ends the session.
		if v := bytes.TrimSpace(f.line); len(v) > 0 {
			f.pending = append(v, '\n')
		}
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// readLine reads the next line, without its newline, into f.line, or
// reports that it is longer than maxLine (its bytes past the limit are
// read and dropped). At the end of the input it sets f.err.
func (f *lineFilter) readLine() (tooLong bool) {
	f.line = f.line[:0]
	for {
		chunk, err := f.in.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		if !tooLong && len(f.line)+len(chunk) > maxLine {
			tooLong = true
			f.line = nil
		}
		if !tooLong {
			if need := len(f.line) + len(chunk); need > cap(f.line) {
				// Doubling: append's gentler growth for large slices
				// allocates several times a long line's size.
				f.line = slices.Grow(f.line, min(max(need, 2*cap(f.line)), maxLine)-len(f.line))
			}
			f.line = append(f.line, chunk...)
		}
		switch {
		case err == nil:
			return tooLong
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			f.err = err
			return tooLong
		}
	}
}

// The answers to the lines the SDK must not see, encoded at their first
// use (not at the start of every conch process, inits and agents included).
var (
	refusedLong = sync.OnceValue(func() []byte {
		return errorLine(jsonrpc.CodeInvalidRequest, msgInvalidRequest, "message longer than "+strconv.Itoa(maxLine)+" bytes")
	})
	notJSONRPC = sync.OnceValue(func() []byte {
		return errorLine(jsonrpc.CodeInvalidRequest, msgInvalidRequest, "not a JSON-RPC 2.0 message")
	})
	batch = sync.OnceValue(func() []byte {
		return errorLine(jsonrpc.CodeInvalidRequest, msgInvalidRequest, "batches are not supported")
	})
)

// check returns the reply to a line the SDK must not see, or nil.
func check(line []byte) []byte {
	v := bytes.TrimSpace(line)
	switch {
	case len(v) == 0:
		return nil
	case !json.Valid(v):
		return parseError()
	case v[0] == '[':
		return batch()
	case v[0] != '{':
		return notJSONRPC()
	}
	if !decodable(v) {
		return notJSONRPC()
	}
	return nil
}

// quietCancel is a Transport whose connection sends no response to a call
// that the client cancelled while it was in flight.
type quietCancel struct{ mcp.Transport }

func (t quietCancel) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &quietConn{Connection: c, closed: make(chan struct{})}, nil
}

type quietConn struct {
	mcp.Connection
	calls     inflight
	closed    chan struct{} // ends a Read's wait in calls.saw
	closeOnce sync.Once
}

func (c *quietConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok {
		c.calls.saw(req, c.closed)
	}
	return m, err
}

func (c *quietConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

func (c *quietConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Response); ok && c.calls.done(r.ID) {
		return nil
	}
	return c.Connection.Write(ctx, m)
}
