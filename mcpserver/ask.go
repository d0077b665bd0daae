package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/tools"
)

// Questions to clients of MCP 2026-07-28 and later (docs/transports.md#questions-by-multi-round-trip).
//
// Such a server must not send elicitation/create: a call that needs an
// answer ends with resultType "input_required", the question as a form
// request, and an opaque requestState; the client asks its user and
// calls again with the answer and the state (SEP-2322). conch's tools ask
// synchronously (tools.Approver), in the middle of a call: before a
// command runs, after the sandbox denied it something, or when it
// connects somewhere a network policy asks about. So the call goes on in
// the background, held under its owner and blocked in the question,
// while the client asks; the retry hands it the answer and waits for its
// end (or its next question). Nothing runs again on a retry: a command
// the sandbox denied something has run once, and the retry's answer only
// decides whether it runs a second time.
//
// The state is the server's word that it asked this question of this
// owner: an HMAC (with a key made at start) over the owner, the waiting
// call, its command line, its directory, the kind of question and an
// expiry. A state that was altered, that another owner sends, that has
// expired, or that was used already is refused with "invalid request
// state", and the waiting call is not touched.

// msgInvalidState refuses a retry whose requestState the server cannot
// honour.
const msgInvalidState = "invalid request state"

// DefaultRequestStateTTL is how long a question sent by multi round-trip
// waits for the client's retry.
const DefaultRequestStateTTL = 10 * time.Minute

// questionInput is the key of the question in inputRequests.
const questionInput = "question"

// asking is a call of a 2026-07-28 client that may ask questions: it runs
// in the background under its owner, and each request of the client
// (the call, then each retry) waits for its next question or its end.
type asking struct {
	x      *session
	cancel context.CancelFunc

	questions chan tools.Question // the call's next question, to the waiting request
	answers   chan tools.Answer   // the retry's answer, to the call

	// progress reports the call's progress to the request waiting now.
	progress atomic.Pointer[func(tools.Progress)]

	mu       sync.Mutex
	waiting  bool // a request waits for the call
	finished bool
	result   tools.Result
	done     chan struct{} // closed when result is set

	// q is the question the client is asked now, with its pending id.
	q       tools.Question
	pending string
}

// askApprover is the approver of an asking call: a question goes to the
// request that waits and the answer comes from the retry, within the
// state's lifetime.
type askApprover struct {
	a   *asking
	ttl time.Duration
}

func (ap askApprover) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	select {
	case ap.a.questions <- q:
	case <-ctx.Done():
		return tools.Declined, ctx.Err()
	}
	t := time.NewTimer(ap.ttl)
	defer t.Stop()
	select {
	case a := <-ap.a.answers:
		return a, nil
	case <-ctx.Done():
		return tools.Declined, ctx.Err()
	case <-t.C:
		return tools.Declined, context.DeadlineExceeded
	}
}

// callAsking serves a tools/call of a 2026-07-28 client: a new call when
// it carries no requestState, else the retry of the call waiting under
// the state.
func (s *Server) callAsking(ctx context.Context, x *session, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.log.Debug("tool call asks by multi round-trip", "session", x.id, "tool", name, "protocol", req.ProtocolVersion(), "retry", req.Params.RequestState != "")
	if st := req.Params.RequestState; st != "" {
		a, err := s.openState(x, st, name, req.Params.Arguments)
		if err != nil {
			s.log.Warn("retry refused", "session", x.id, "reason", err.Error())
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msgInvalidState}
		}
		ans := tools.Unanswered
		if r, ok := req.Params.InputResponses[questionInput].(*mcp.ElicitResult); ok && r != nil {
			ans = answerOf(a.q, r)
		}
		a.answers <- ans // buffered: the call waits for it, or has given up
		return s.await(ctx, a, req)
	}
	// The call belongs to the owner, not to this request: it outlives
	// the request that returns its question.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cctx, done := x.track(cctx)
	a := &asking{
		x:         x,
		cancel:    cancel,
		questions: make(chan tools.Question),
		answers:   make(chan tools.Answer, 1),
		done:      make(chan struct{}),
	}
	sess := tools.Session{ID: x.id, Cwd: x.workdir(ctx, req.Session, false)}
	co := tools.CallOptions{
		Approver: askApprover{a: a, ttl: s.opts.RequestStateTTL},
		Progress: func(p tools.Progress) {
			if f := a.progress.Load(); f != nil {
				(*f)(p)
			}
		},
	}
	args := req.Params.Arguments
	// Close waits for the call as for any session's: it is cancelled
	// with its owner.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done()
		cancel()
		return nil, ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer done()
		defer cancel()
		r := s.ts.Call(cctx, sess, name, args, &co)
		a.mu.Lock()
		a.finished, a.result = true, r
		collected := a.waiting
		a.mu.Unlock()
		close(a.done)
		if cctx.Err() != nil || !collected {
			// No one reads this result (the client cancelled the call,
			// or never retried): its notices ride on the owner's next.
			x.requeue(r.Notices)
		}
	}()
	return s.await(ctx, a, req)
}

// await waits, for the request req, until the call a ends or asks a
// question. A question is answered as input_required, under a new state;
// a request the client cancels cancels the call.
func (s *Server) await(ctx context.Context, a *asking, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a.mu.Lock()
	if !a.finished {
		a.waiting = true
	}
	a.mu.Unlock()
	if f := s.progressFunc(ctx, a.x, req); f != nil {
		a.progress.Store(&f)
	}
	defer func() {
		a.progress.Store(nil)
		a.mu.Lock()
		a.waiting = false
		a.mu.Unlock()
	}()
	select {
	case <-a.done:
		return callResult(a.result), nil
	case q := <-a.questions:
		st, err := s.sealState(a, q)
		if err != nil {
			a.cancel()
			return nil, err
		}
		res := &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{questionInput: questionParams(q)},
			RequestState:  st,
		}
		return res, nil
	case <-ctx.Done():
		a.cancel()
		<-a.done
		return callResult(a.result), nil
	}
}

// progressFunc reports progress to the client of req when it asked for
// it; nil when it did not.
func (s *Server) progressFunc(ctx context.Context, x *session, req *mcp.CallToolRequest) func(tools.Progress) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return func(p tools.Progress) {
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

// claims are what a requestState says; the HMAC covers them all.
type claims struct {
	Owner   string `json:"o"` // the owner's binding (session.bind)
	Pending string `json:"p"` // the waiting call, under the owner
	Command string `json:"c"`
	Dir     string `json:"d"`
	Kind    string `json:"k"`
	Expires int64  `json:"e"` // Unix milliseconds
}

// questionKind names what q asks, for the state.
func questionKind(q tools.Question) string {
	switch {
	case q.Network != nil:
		return "network"
	case q.Kind == tools.AskRerun:
		return "rerun"
	case q.Kind == tools.AskOutside:
		return "outside"
	}
	return "rule"
}

// sealState registers a's question q under a new pending id of its
// owner and returns the state that lets the owner's retry answer it.
func (s *Server) sealState(a *asking, q tools.Question) (string, error) {
	id := randomHex(16)
	c := claims{Owner: a.x.bind, Pending: id, Command: q.Command, Dir: q.Cwd, Kind: questionKind(q),
		Expires: time.Now().Add(s.opts.RequestStateTTL).UnixMilli()}
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	// Set before the call is published: the retry reads them under x.mu.
	a.q, a.pending = q, id
	a.x.mu.Lock()
	if a.x.ended {
		a.x.mu.Unlock()
		return "", errSessionEnded
	}
	if a.x.pending == nil {
		a.x.pending = map[string]*asking{}
	}
	a.x.pending[id] = a
	a.x.mu.Unlock()
	// Forget it once its time is up: the call gives up on its own.
	time.AfterFunc(s.opts.RequestStateTTL, func() { a.x.take(id) })
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body) + "." + enc.EncodeToString(s.mac(body)), nil
}

// openState checks state for a retry of tool name with args by the owner
// x, and takes the call it names (a state opens once).
func (s *Server) openState(x *session, state, name string, args json.RawMessage) (*asking, error) {
	enc := base64.RawURLEncoding
	b64, sig64, ok := strings.Cut(state, ".")
	if !ok {
		return nil, errState("malformed")
	}
	body, err1 := enc.DecodeString(b64)
	sig, err2 := enc.DecodeString(sig64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, s.mac(body)) {
		return nil, errState("altered")
	}
	var c claims
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errState("malformed")
	}
	if c.Owner != x.bind {
		return nil, errState("another owner's")
	}
	if time.Now().UnixMilli() >= c.Expires {
		return nil, errState("expired")
	}
	var a struct {
		Command string `json:"command"`
	}
	if name != tools.NameBash || json.Unmarshal(args, &a) != nil || a.Command != c.Command {
		return nil, errState("for another call")
	}
	p := x.take(c.Pending)
	if p == nil {
		return nil, errState("used or gone")
	}
	if p.q.Cwd != c.Dir || questionKind(p.q) != c.Kind {
		p.cancel()
		return nil, errState("for another question")
	}
	return p, nil
}

type errState string

func (e errState) Error() string { return "request state: " + string(e) }

// mac is the HMAC of a state's body under the server's key.
func (s *Server) mac(body []byte) []byte {
	m := hmac.New(sha256.New, s.stateKey)
	m.Write(body)
	return m.Sum(nil)
}

// take removes and returns the call waiting under pending id, or nil.
func (x *session) take(id string) *asking {
	x.mu.Lock()
	defer x.mu.Unlock()
	a := x.pending[id]
	delete(x.pending, id)
	return a
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
