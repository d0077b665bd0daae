package mcpserver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/mcpserver/taskext"
	"github.com/conch-dev/conch/tools"
)

// Defaults of Options.
const (
	DefaultSessionTimeout = 30 * time.Minute
	DefaultKeepAlive      = 30 * time.Second
	DefaultRootsTimeout   = 2 * time.Second

	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultMaxConns      = 256
)

// MaxWait is the cap on task_output's wait (tools.Options.MaxWait) for a
// toolset served over MCP: MCP clients cut a call off near 60 s, so a
// longer wait would only lose its answer.
const MaxWait = 50 * time.Second

// Options configure a Server. A nil *Options means all defaults.
type Options struct {
	// Name and Version identify the server to clients (defaults "conch"
	// and "dev").
	Name, Version string
	// Logger receives the server's logs (default: discard). It must not
	// write to the stdio transport's output.
	Logger *slog.Logger
	// Token is the bearer token every HTTP request must carry
	// ("Authorization: Bearer <Token>"), from loopback too: other users of
	// the machine can reach a loopback port. Without a Token or Clients
	// every HTTP request gets 401.
	Token string
	// Clients are named HTTP clients, each with a token of its own: a
	// request carrying one is that client's. Over MCP 2026-07-28 (no
	// sessions) a client is the owner of its tasks; the single Token's
	// owner is "http". Over older revisions each MCP session is its own
	// owner, and belongs to the client that opened it.
	Clients []Client
	// SessionTimeout ends an HTTP session that has had no request in
	// flight and no open event stream for this long (default 30 min;
	// negative: never).
	SessionTimeout time.Duration
	// KeepAlive is the interval of the pings sent to HTTP sessions that
	// hold an event stream; two failed pings in a row end the session,
	// and so do two intervals in which a client that lost its stream
	// neither re-opened it nor sent a request (default 30 s; negative: no
	// pings).
	KeepAlive time.Duration
	// RootsTimeout bounds the roots/list request that finds a session's
	// working directory (default 2 s).
	RootsTimeout time.Duration
	// RequestStateTTL is how long a question asked by multi round-trip
	// (MCP 2026-07-28) waits for the client's answer; its requestState
	// expires then (default DefaultRequestStateTTL).
	RequestStateTTL time.Duration

	// Limits on HTTP clients, against slow and flooding ones. A
	// connection must send its request headers within HeaderTimeout
	// (default 10 s; Serve) and a POST body within BodyTimeout (default
	// 30 s); an idle keep-alive connection is closed after IdleTimeout
	// (default 2 min; Serve). Serve holds at most MaxConns connections at
	// once (default 256): a newcomer takes the place of one that sent part
	// of its headers and not their end, or nothing or no request for half
	// a second; else it waits until one closes.
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	MaxConns                                int

	// Metrics, if set, is served at GET /metrics by the HTTP transport,
	// behind its bearer token (metrics.Metrics.Handler,
	// docs/operations.md#metrics).
	Metrics http.Handler
}

// Client is a named HTTP client (Options.Clients).
type Client struct {
	// Name names the client: the owner of its tasks over MCP 2026-07-28,
	// and CONCH_SESSION_ID in their commands. Names are unique and not
	// "http".
	Name string
	// Token is the client's bearer token.
	Token string
	// Cwd is the working directory of the client's commands over MCP
	// 2026-07-28 (which has no roots); "" is the server's.
	Cwd string
}

// Server is conch's MCP server: the tools of one Toolset, served to any
// number of sessions over stdio and streamable HTTP. Create it with New.
// It is safe for concurrent use.
type Server struct {
	ts   *tools.Toolset
	opts Options
	// stateKey signs request states (ask.go); made at start, so a state
	// outlives neither the process nor a forgery.
	stateKey []byte
	// instance names this run of the server in task ids (tasks.go).
	instance string
	log      *slog.Logger
	tools    []tools.Tool

	httpOnce sync.Once
	httpMCP  *mcp.Server

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}
	byMCP    map[*mcp.ServerSession]*session // HTTP sessions
	byHTTPID map[string]*session             // by Mcp-Session-Id
	owners   map[string]*owner               // 2026-07-28 HTTP owners, by client name
	ids      map[string]bool                 // session ids in use
	nextHTTP int
	wg       sync.WaitGroup // session goroutines and ServeStdio calls
}

// ErrClosed is returned by ServeStdio after Close.
var ErrClosed = errors.New("mcpserver: server is closed")

// errSessionEnded is the cancel cause of calls whose session ended.
var errSessionEnded = errors.New("mcpserver: session ended")

// New returns a Server for the tools of ts. A nil opts means defaults.
func New(ts *tools.Toolset, opts *Options) *Server {
	if ts == nil {
		panic("mcpserver: nil toolset")
	}
	s := &Server{
		ts:       ts,
		tools:    ts.Tools(),
		sessions: make(map[*session]struct{}),
		byMCP:    make(map[*mcp.ServerSession]*session),
		byHTTPID: make(map[string]*session),
		owners:   make(map[string]*owner),
		ids:      make(map[string]bool),
		stateKey: make([]byte, 32),
	}
	rand.Read(s.stateKey)
	s.instance = randomHex(4)
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Name == "" {
		s.opts.Name = "conch"
	}
	if s.opts.Version == "" {
		s.opts.Version = "dev"
	}
	if s.opts.SessionTimeout == 0 {
		s.opts.SessionTimeout = DefaultSessionTimeout
	}
	if s.opts.KeepAlive == 0 {
		s.opts.KeepAlive = DefaultKeepAlive
	}
	if s.opts.RequestStateTTL <= 0 {
		s.opts.RequestStateTTL = DefaultRequestStateTTL
	}
	if s.opts.RootsTimeout <= 0 {
		s.opts.RootsTimeout = DefaultRootsTimeout
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&s.opts.HeaderTimeout, DefaultHeaderTimeout},
		{&s.opts.BodyTimeout, DefaultBodyTimeout},
		{&s.opts.IdleTimeout, DefaultIdleTimeout},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if s.opts.MaxConns <= 0 {
		s.opts.MaxConns = DefaultMaxConns
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Close ends every session (their running calls are cancelled and their
// background tasks disposed of) and waits until that is done. ServeStdio
// calls in progress return; new sessions are refused. Close does not close
// the Toolset or its executor. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	all := make([]*session, 0, len(s.sessions))
	for x := range s.sessions {
		all = append(all, x)
	}
	s.mu.Unlock()
	for _, x := range all {
		x.end("server closing")
	}
	s.wg.Wait()
	return nil
}

// resolver finds the conch session (the owner) of an SDK session; ctx is
// the request's, which over HTTP names the client (clientOf).
type resolver func(context.Context, *mcp.ServerSession) (*session, error)

// newMCP returns an SDK server with the tools registered, whose requests
// belong to the sessions resolve gives.
func (s *Server) newMCP(resolve resolver) *mcp.Server {
	caps := &mcp.ServerCapabilities{}
	taskext.Advertise(caps)
	srv := mcp.NewServer(&mcp.Implementation{Name: s.opts.Name, Version: s.opts.Version}, &mcp.ServerOptions{
		Instructions: s.ts.Prompt(),
		Logger:       s.sdkLog(),
		// Every revision the SDK serves: sessions by the initialize
		// handshake before 2026-07-28, owners after (docs/transports.md).
		SupportedProtocolVersions: mcp.SupportedProtocolVersions(),
		// No logging capability: conch sends no log messages. The tasks
		// extension is used only with clients that declare it.
		Capabilities: caps,
		RootsListChangedHandler: func(ctx context.Context, req *mcp.RootsListChangedRequest) {
			if x, err := resolve(ctx, req.Session); err == nil {
				x.forgetCwd()
			}
		},
	})
	srv.AddReceivingMiddleware(s.middleware(resolve))
	if err := taskext.Register(srv, taskBackend{s: s, resolve: resolve}); err != nil {
		panic("mcpserver: " + err.Error()) // only a clash with a standard method fails
	}
	for _, t := range s.tools {
		srv.AddTool(sdkTool(t), s.handler(t.Name, resolve))
	}
	return srv
}

// statelessVersion is the first protocol revision without sessions,
// roots, or requests from the server (questions go by multi round-trip).
const statelessVersion = "2026-07-28"

// stateless reports whether req follows 2026-07-28 or later.
func stateless(req *mcp.CallToolRequest) bool { return req.ProtocolVersion() >= statelessVersion }

// sdkTool is t as the SDK lists it: the schemas go out as the toolset's
// bytes.
func sdkTool(t tools.Tool) *mcp.Tool {
	destructive := t.Destructive
	return &mcp.Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		OutputSchema: t.OutputSchema,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.ReadOnly,
			DestructiveHint: &destructive,
		},
	}
}

// middleware registers sessions on first sight and lists tools in the
// toolset's order.
func (s *Server) middleware(resolve resolver) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				if _, err := resolve(ctx, ss); err != nil {
					return nil, err
				}
			}
			res, err := next(ctx, method, req)
			if lt, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				s.order(lt.Tools)
			}
			if err == nil && method == "tools/call" {
				res = s.asTask(req, res)
			}
			return res, err
		}
	}
}

// order sorts list into the toolset's order.
func (s *Server) order(list []*mcp.Tool) {
	rank := func(name string) int {
		for i, t := range s.tools {
			if t.Name == name {
				return i
			}
		}
		return len(s.tools)
	}
	slices.SortStableFunc(list, func(a, b *mcp.Tool) int { return rank(a.Name) - rank(b.Name) })
}

// handler runs tool name for the calling session.
func (s *Server) handler(name string, resolve resolver) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		x, err := resolve(ctx, req.Session)
		if err != nil {
			return nil, err
		}
		if stateless(req) && (req.Params.RequestState != "" || name == tools.NameBash && elicits(req.ClientCapabilities())) {
			return s.callAsking(ctx, x, name, req)
		}
		ctx, done := x.track(ctx)
		defer done()
		sess := tools.Session{ID: x.id}
		if name == tools.NameBash { // only bash runs anything in a directory
			sess.Cwd = x.workdir(ctx, req.Session, !stateless(req))
		}
		var co tools.CallOptions
		if name == tools.NameBash && !stateless(req) && canElicit(req.Session) {
			co.Approver = elicitApprover{req.Session}
		}
		if token := req.Params.GetProgressToken(); token != nil {
			co.Progress = func(p tools.Progress) {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      p.Elapsed.Seconds(),
					Message:       progressMessage(p),
				})
				if err != nil {
					s.log.Debug("progress notification failed", "session", x.id, "error", err)
				}
			}
		}
		start := time.Now()
		x.awaitCancelled(ctx)
		stop := context.AfterFunc(ctx, x.cancelBegan)
		r := s.ts.Call(withTrace(ctx, req), sess, name, req.Params.Arguments, &co)
		began := !stop()
		if ctx.Err() != nil {
			// A cancelled call's result never reaches the model (the
			// client drops it): its notices wait for the session's next
			// result.
			x.requeue(r.Notices)
		}
		if began {
			x.cancelEnded()
		}
		s.log.Debug("tool call", "session", x.id, "tool", name, "isError", r.IsError, "elapsed", time.Since(start))
		return callResult(r), nil
	}
}

func progressMessage(p tools.Progress) string {
	msg := fmt.Sprintf("running for %.1fs, %s of output so far", p.Elapsed.Seconds(), byteCount(p.Bytes))
	if p.LastLine != "" {
		msg += "; last line: " + p.LastLine
	}
	return msg
}

func byteCount(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// callResult is r as MCP carries it: the text, then one block per
// completion notice; the structured value, whose "text" says all of it
// again for the hosts that show a model only the structured value
// (Claude Code, Codex); the error flag.
func callResult(r tools.Result) *mcp.CallToolResult {
	content := make([]mcp.Content, 0, 1+len(r.Notices))
	content = append(content, &mcp.TextContent{Text: r.Text})
	for _, n := range r.Notices {
		content = append(content, &mcp.TextContent{Text: n.Text})
	}
	res := &mcp.CallToolResult{Content: content, IsError: r.IsError}
	if r.Value != nil {
		res.StructuredContent = r.Value
	}
	return res
}

// sdkLog is the SDK's logger: warnings and errors only, as it logs every
// session event at Info.
func (s *Server) sdkLog() *slog.Logger {
	return slog.New(minLevel{Handler: s.log.Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
