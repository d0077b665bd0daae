package mcpserver

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/tools"
)

// session is one MCP session as conch sees it: the owner of background
// tasks, a working directory, and the calls it has in flight.
type session struct {
	srv *Server
	id  string // task owner, CONCH_SESSION_ID
	// bind identifies this owner in the request states it is given: ids
	// are reused, bind never.
	bind string
	// client is the named HTTP client the session or owner belongs to
	// ("" for the single token, and on stdio).
	client string
	// home is the working directory when the client names none by roots
	// (a named HTTP client's cwd); "" is the executor's default.
	home string

	mu       sync.Mutex
	ended    bool
	deleted  bool // the client sent DELETE: the reason of its end
	calls    map[uint64]context.CancelCauseFunc
	nextCall uint64

	// HTTP activity, for the idle timeout and the keep-alive: requests
	// in flight (event streams included), open event streams, whether
	// one was ever open, when it went idle, and the last time a request
	// started or ended.
	active     int
	listening  int
	listened   bool
	idleSince  time.Time
	idle       *time.Timer
	lastActive time.Time

	// ctx is done once the session ended (end was called).
	ctx  context.Context
	stop context.CancelFunc

	// cancelled counts the calls whose client cancelled them and that
	// have not returned yet (settled is broadcast when it changes): a new
	// call waits for them, so that their notices ride on it (see
	// awaitCancelled). Guarded by mu.
	cancelled int
	settled   *sync.Cond

	// httpCalls are the calls in flight over HTTP, to drop the responses
	// of those the client cancelled (stdio follows them on its
	// connection).
	httpCalls inflight

	// cwdMu serializes the roots lookup; cwd is valid while cwdKnown.
	cwdMu    sync.Mutex
	cwd      string
	cwdKnown bool

	// pending are the calls waiting for a client's retry with an answer
	// (ask.go), by pending id; under mu.
	pending map[string]*asking
	// cancels are what the tasks extension keeps of the owner's tasks
	// (tasks.go).
	cancels taskNotes
}

// newSession registers a session whose id is base, or base-2, base-3, …
// when base is in use. It fails after Close.
func (s *Server) newSession(base string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newSessionLocked(base)
}

func (s *Server) newSessionLocked(base string) (*session, error) {
	if s.closed {
		return nil, ErrClosed
	}
	id := base
	for n := 2; s.ids[id]; n++ {
		id = base + "-" + strconv.Itoa(n)
	}
	x := &session{
		srv:   s,
		id:    id,
		bind:  randomHex(16),
		calls: make(map[uint64]context.CancelCauseFunc),
	}
	x.ctx, x.stop = context.WithCancel(context.Background())
	s.ids[id] = true
	s.sessions[x] = struct{}{}
	s.wg.Add(1) // done by finish
	return x, nil
}

// finish ends x, disposes of its background tasks and forgets it. The
// party that serves x calls it once the SDK session is closed.
func (s *Server) finish(x *session) {
	defer s.wg.Done()
	x.end("closed")
	s.dispose(x)
	s.forget(x)
}

// forget unregisters x.
func (s *Server) forget(x *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, x)
	delete(s.ids, x.id)
	for k, v := range s.byMCP {
		if v == x {
			delete(s.byMCP, k)
		}
	}
	for k, v := range s.byHTTPID {
		if v == x {
			delete(s.byHTTPID, k)
		}
	}
	for k, o := range s.owners {
		if o.x == x {
			delete(s.owners, k)
		}
	}
}

// dispose kills and forgets the background tasks of x, kills what its
// commands left running, and forgets what its user allowed for the
// session.
func (s *Server) dispose(x *session) { s.ts.EndSession(x.id) }

// track registers a call of x: the returned ctx is cancelled when x ends
// (or at once if it already has); done unregisters it.
func (x *session) track(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	x.mu.Lock()
	if x.ended || x.deleted {
		x.mu.Unlock()
		cancel(errSessionEnded)
		return ctx, func() {}
	}
	id := x.nextCall
	x.nextCall++
	x.calls[id] = cancel
	x.mu.Unlock()
	return ctx, func() {
		x.mu.Lock()
		delete(x.calls, id)
		x.mu.Unlock()
		cancel(nil)
	}
}

// reasonDeleted is the reason of a session the client ended by DELETE.
const reasonDeleted = "client deleted the session"

// deleting starts the end of a session its client deleted: its calls in
// flight are cancelled at once (the SDK would answer the DELETE only once
// they returned) and no new one starts, but the SDK session stays open
// for the SDK to answer the DELETE: closing it first made that answer a
// 404 ("Failed to terminate session: Not Found"). The SDK's end of the
// session then ends x (finish), and so does its caller.
func (x *session) deleting() {
	x.mu.Lock()
	x.deleted = true
	calls := x.calls
	x.calls = make(map[uint64]context.CancelCauseFunc)
	x.mu.Unlock()
	for _, cancel := range calls {
		cancel(errSessionEnded)
	}
}

// end marks x ended and cancels its calls in flight. Whoever serves x
// then closes the SDK session and disposes of its tasks. It is idempotent.
func (x *session) end(reason string) {
	x.mu.Lock()
	if x.ended {
		x.mu.Unlock()
		return
	}
	x.ended = true
	if x.deleted {
		reason = reasonDeleted
	}
	calls := x.calls
	x.calls = nil
	if x.idle != nil {
		x.idle.Stop()
	}
	x.mu.Unlock()
	x.srv.log.Info("session ended", "session", x.id, "reason", reason, "callsCancelled", len(calls))
	for _, cancel := range calls {
		cancel(errSessionEnded)
	}
	x.stop()
}

// requeue gives notices back to the toolset for x's next result, unless
// x has ended: its end forgets what the toolset holds for it (under x.mu,
// ended is set before the toolset's session ends).
// cancelBegan and cancelEnded count a call the client cancelled, from
// its cancellation to its return.
func (x *session) cancelBegan() { x.addCancelled(1) }
func (x *session) cancelEnded() { x.addCancelled(-1) }

func (x *session) addCancelled(n int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cancelled += n
	x.cond().Broadcast()
}

func (x *session) cond() *sync.Cond {
	if x.settled == nil {
		x.settled = sync.NewCond(&x.mu)
	}
	return x.settled
}

// awaitCancelled waits, for at most maxCancelWait or until ctx is done,
// until no call of the session that its client cancelled is still
// returning. A client gets a cancelled call's end at once and may call
// again while the server still ends the command (over HTTP the two run
// side by side): the new call then carries the notices the cancelled one
// drained, instead of the one after it.
func (x *session) awaitCancelled(ctx context.Context) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancelled <= 0 {
		return
	}
	c := x.cond()
	timer := time.AfterFunc(maxCancelWait, func() { x.mu.Lock(); c.Broadcast(); x.mu.Unlock() })
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() { x.mu.Lock(); c.Broadcast(); x.mu.Unlock() })
	defer stop()
	deadline := time.Now().Add(maxCancelWait)
	for x.cancelled > 0 && ctx.Err() == nil && time.Now().Before(deadline) {
		c.Wait()
	}
}

// maxCancelWait bounds awaitCancelled: a cancelled command ends within
// its kill grace.
const maxCancelWait = 10 * time.Second

func (x *session) requeue(notices []tools.Notice) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.ended {
		x.srv.ts.Requeue(x.id, notices)
	}
}

// forgetCwd makes the next call ask the client for its roots again.
func (x *session) forgetCwd() {
	x.cwdMu.Lock()
	x.cwdKnown = false
	x.cwdMu.Unlock()
}

// workdir is the session's working directory: with roots, the client's
// first file:// root when it declared the roots capability; else the
// owner's home, "" being the executor's default. Clients of 2026-07-28
// have no roots.
func (x *session) workdir(ctx context.Context, ss *mcp.ServerSession, roots bool) string {
	if !roots {
		return x.home
	}
	x.cwdMu.Lock()
	defer x.cwdMu.Unlock()
	if x.cwdKnown {
		return x.cwd
	}
	cwd, final := x.rootsCwd(ctx, ss)
	if final {
		x.cwd, x.cwdKnown = cwd, true
	}
	return cwd
}

// rootsCwd asks the client for its roots. final is false when the answer
// should not be kept (the call was cancelled while asking).
func (x *session) rootsCwd(ctx context.Context, ss *mcp.ServerSession) (cwd string, final bool) {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.RootsV2 == nil {
		return x.home, true
	}
	rctx, cancel := context.WithTimeout(ctx, x.srv.opts.RootsTimeout)
	defer cancel()
	//lint:ignore SA1019 roots are how MCP clients name their workspace today.
	res, err := ss.ListRoots(rctx, nil)
	if err != nil {
		if ctx.Err() != nil {
			return "", false
		}
		x.srv.log.Warn("roots/list failed; using the default working directory", "session", x.id, "error", err)
		return "", true
	}
	for _, r := range res.Roots {
		dir, ok := fileRoot(r.URI)
		if !ok {
			continue
		}
		// The executor checks it: the directory is on its host.
		real, err := x.srv.ts.HostDir(dir)
		if err != nil {
			x.srv.log.Warn("first file:// root is not a directory; using the default working directory",
				"session", x.id, "root", r.URI, "error", err)
			return "", true
		}
		x.srv.log.Info("session working directory from roots", "session", x.id, "cwd", real)
		return real, true
	}
	return "", true
}

// fileRoot is the local absolute path of a file:// URI.
func fileRoot(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
		return "", false
	}
	return filepath.Clean(u.Path), true
}
