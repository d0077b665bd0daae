package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/conch-dev/conch/internal/syncio"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

// AgentOptions configure an Agent. The zero value is usable.
type AgentOptions struct {
	// SessionDir is where sessions are recorded, one JSON Lines file per
	// session (<id>.jsonl), so that session/load can replay them. ""
	// records nothing, and session/load then finds no session.
	SessionDir string
	// Logger receives diagnostics (default: slog.Default()). It must not
	// write to the connection's output.
	Logger *slog.Logger
	// Version is the agent version reported at initialize.
	Version string
}

// Agent is an ACP agent whose model is the user: each prompt is one
// command, run through the tools of its session and drawn as a card. See
// the package documentation for what it answers. An Agent serves one
// connection.
type Agent struct {
	ts      *tools.Toolset
	store   *store
	log     *slog.Logger
	version string

	mu       sync.Mutex
	conn     *sdk.AgentSideConnection
	terminal bool // the capability of the latest initialize
	sessions map[string]*session
	closed   bool
	running  sync.WaitGroup // handlers in flight
	nextTurn int
	// arrivals orders the prompts of each session id with its cancels,
	// as read from the input, and queues them (see turnOrder): an entry
	// lives while a prompt read has not returned from Prompt.
	arrivals map[string]*arrival
	input    io.Writer // the SDK's input, where queued prompts are passed on
	output   io.Writer // the connection's output
}

// arrival counts the session/prompt requests of one session id, and
// queues those read while one of them is with the SDK: a session runs its
// prompts one at a time, in the order sent.
type arrival struct {
	read     int // read from the input
	started  int // of those, the ones Prompt has begun
	cancelTo int // read when the latest session/cancel was read
	busy     bool
	queue    []queuedPrompt // read while busy, in input order
}

// queuedPrompt is a session/prompt line kept until its turn.
type queuedPrompt struct {
	id   *json.RawMessage // nil for a notification
	line []byte
}

// session is one ACP session: its tasks are owned by its id.
type session struct {
	id string

	// cancels are the cancel functions of its prompts in flight, keyed by
	// a per-agent turn number (under Agent.mu).
	cancels map[int]context.CancelFunc

	turn   sync.Mutex // one prompt, load or notice at a time; guards the rest
	cwd    string
	bridge *Bridge
	rec    *recorder
	next   int // number of the next tool call id
}

// NewAgent returns an agent over ts. A nil opts means the defaults.
func NewAgent(ts *tools.Toolset, opts *AgentOptions) *Agent {
	if ts == nil {
		panic("acp: nil toolset")
	}
	var o AgentOptions
	if opts != nil {
		o = *opts
	}
	a := &Agent{ts: ts, log: o.Logger, version: o.Version, sessions: make(map[string]*session), arrivals: make(map[string]*arrival)}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.version == "" {
		a.version = "dev"
	}
	if o.SessionDir != "" {
		a.store = &store{dir: o.SessionDir, log: a.log}
	}
	return a
}

// handler answers the SDK's requests for an Agent. It is a type of its
// own so that the methods the SDK calls, which need the connection Serve
// makes, are not methods of Agent.
type handler struct{ *Agent }

// Serve speaks ACP on in and out (JSON-RPC, one message a line) until in
// ends or ctx is done. Then it cancels every prompt in flight, waits for
// them, answers the queued ones cancelled, kills and forgets every task
// of its sessions and closes their records. It returns nil after a normal end. The goroutine reading in
// may outlive Serve until in ends (closing stdin is the caller's).
func (a *Agent) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &syncio.Writer{W: out} // the SDK and the input filter both write
	pr, pw := io.Pipe()
	a.mu.Lock()
	if a.conn != nil {
		a.mu.Unlock()
		return errors.New("acp: agent already served a connection")
	}
	a.conn = sdk.NewAgentSideConnection(handler{a}, w, pr)
	a.conn.SetLogger(a.log)
	a.input, a.output = pw, w
	conn := a.conn
	a.mu.Unlock()

	go filterInput(in, pw, w, a.log, a)
	select {
	case <-conn.Done():
	case <-ctx.Done():
		pw.Close()
		<-conn.Done()
	}
	pw.Close() // a queued prompt passed on from now on fails at once
	a.shutdown()
	pr.Close()
	return nil
}

// shutdown ends every prompt and disposes of every session.
func (a *Agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	for _, s := range a.sessions {
		for _, cancel := range s.cancels {
			cancel()
		}
	}
	a.mu.Unlock()
	a.running.Wait()
	// The prompts still queued never reach the SDK: they are answered
	// here, as the ones in flight were.
	a.mu.Lock()
	var queued []queuedPrompt
	for _, ar := range a.arrivals {
		queued = append(queued, ar.queue...)
		ar.queue = nil
	}
	a.mu.Unlock()
	for _, q := range queued {
		a.answerCancelled(q)
	}
	for _, s := range a.sessions {
		// Its tasks and what its commands left running.
		a.ts.EndSession(s.id)
		if s.rec != nil {
			if err := s.rec.close(); err != nil {
				a.log.Warn("acp: closing a session record", "session", s.id, "err", err)
			}
		}
	}
}

// enter counts a handler in flight; false once the agent is shutting down.
func (a *Agent) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.running.Add(1)
	return true
}

// guard turns a panic of a handler into an internal error, logged with
// its stack: a bug met by one request must not end every session.
func (a *Agent) guard(method string, err *error) {
	if r := recover(); r != nil {
		a.log.Error("acp: a handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
		*err = sdk.NewInternalError(map[string]any{"error": fmt.Sprint("internal error: ", r)})
	}
}

var errShuttingDown = sdk.NewInternalError(map[string]any{"error": "the agent is shutting down"})

// codeResourceNotFound is ACP's JSON-RPC error code for an unknown
// resource; the SDK has no constructor for it.
const codeResourceNotFound = -32002

func resourceNotFound(id sdk.SessionId) error {
	return &sdk.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]any{"sessionId": string(id), "error": "unknown session " + string(id)}}
}

// Initialize answers initialize and notes the client's terminal
// capability for the sessions created or loaded from now on.
func (a handler) Initialize(ctx context.Context, p sdk.InitializeRequest) (_ sdk.InitializeResponse, err error) {
	defer a.guard("initialize", &err)
	a.mu.Lock()
	a.terminal = TerminalOutput(p.ClientCapabilities)
	a.mu.Unlock()
	return sdk.InitializeResponse{
		ProtocolVersion:   sdk.ProtocolVersionNumber,
		AgentCapabilities: sdk.AgentCapabilities{LoadSession: true},
		AgentInfo:         &sdk.Implementation{Name: "conch", Title: sdk.Ptr("conch"), Version: a.version},
		AuthMethods:       []sdk.AuthMethod{},
	}, nil
}

// snapshot is a new snapshot for a session with cwd.
func (a *Agent) snapshot(cwd string) Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Snapshot{Terminal: a.terminal, Cwd: cwd, HostCwds: a.ts.HostCwds()}
}

// sessionCwd checks a session cwd from the client: it must be an
// absolute path to an existing folder, or every command of the session
// would fail. Its symbolic links are resolved, as the tools want. The
// default executor checks it, as the folder is on its host.
func (a *Agent) sessionCwd(cwd string) (string, error) {
	refuse := func(msg string) (string, error) {
		return "", sdk.NewInvalidParams(map[string]any{"error": msg})
	}
	if !filepath.IsAbs(cwd) {
		return refuse("cwd must be an absolute path, got " + strconv.Quote(cwd))
	}
	cwd = filepath.Clean(cwd)
	real, err := a.ts.HostDir(cwd)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return refuse("cwd " + cwd + " does not exist")
	case errors.Is(err, shell.ErrNotDir):
		return refuse("cwd " + cwd + " is not a directory")
	case err != nil:
		return refuse("cwd " + cwd + ": " + err.Error())
	}
	return real, nil
}

func newSessionID() string {
	var b [12]byte
	rand.Read(b[:])
	return "sess_" + hex.EncodeToString(b[:])
}

// NewSession creates a session in the request's cwd, snapshotting the
// terminal capability, and starts its record.
func (a handler) NewSession(ctx context.Context, p sdk.NewSessionRequest) (_ sdk.NewSessionResponse, err error) {
	if !a.enter() {
		return sdk.NewSessionResponse{}, errShuttingDown
	}
	defer a.running.Done()
	defer a.guard("session/new", &err)
	cwd, err := a.sessionCwd(p.Cwd)
	if err != nil {
		return sdk.NewSessionResponse{}, err
	}
	id := newSessionID()
	s := &session{id: id, cwd: cwd, bridge: NewBridge(a.snapshot(cwd)), next: 1, cancels: map[int]context.CancelFunc{}}
	if a.store != nil {
		if s.rec, err = a.store.create(id, cwd); err != nil {
			a.log.Warn("acp: the session will not be recorded", "session", id, "err", err)
		}
	}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	return sdk.NewSessionResponse{SessionId: sdk.SessionId(id)}, nil
}

// LoadSession replays a recorded session through the presenters with the
// loading session's snapshot (user message chunks for prompts, then its
// cards and messages), and makes it live again in the request's cwd.
func (a handler) LoadSession(ctx context.Context, p sdk.LoadSessionRequest) (_ sdk.LoadSessionResponse, err error) {
	if !a.enter() {
		return sdk.LoadSessionResponse{}, errShuttingDown
	}
	defer a.running.Done()
	defer a.guard("session/load", &err)
	id := string(p.SessionId)
	if a.store == nil {
		return sdk.LoadSessionResponse{}, resourceNotFound(p.SessionId)
	}
	cwd, err := a.sessionCwd(p.Cwd)
	if err != nil {
		return sdk.LoadSessionResponse{}, err
	}
	a.mu.Lock()
	s := a.sessions[id]
	if s == nil {
		// Not live until loaded (bridge set): a prompt for it waits for
		// the load, and fails if the load does.
		s = &session{id: id, cancels: map[int]context.CancelFunc{}}
		a.sessions[id] = s
	}
	a.mu.Unlock()

	// The record is read in the session's turn, so that a live session
	// replays its prompt in flight with its result.
	s.turn.Lock()
	defer s.turn.Unlock()
	recs, err := a.store.load(id)
	if errors.Is(err, errNoSession) {
		a.forgetUnloaded(s)
		return sdk.LoadSessionResponse{}, resourceNotFound(p.SessionId)
	}
	if err != nil {
		a.log.Warn("acp: reading a session record", "session", id, "err", err)
		if recs == nil {
			a.forgetUnloaded(s)
			return sdk.LoadSessionResponse{}, sdk.NewInternalError(map[string]any{"error": err.Error()})
		}
	}
	snap := a.snapshot(cwd)
	a.replay(s.id, recs, snap)
	s.cwd = cwd
	s.bridge = NewBridge(snap)
	a.mu.Lock()
	if a.sessions[id] == nil { // a concurrent load that failed dropped it
		a.sessions[id] = s
	}
	a.mu.Unlock()
	s.next = max(s.next, nextCallNumber(recs))
	if s.rec == nil {
		if s.rec, err = a.store.reopen(id); err != nil {
			a.log.Warn("acp: the session will not be recorded", "session", id, "err", err)
		}
	}
	return sdk.LoadSessionResponse{}, nil
}

// forgetUnloaded drops s, whose turn the caller holds, if no load ever
// made it live.
func (a *Agent) forgetUnloaded(s *session) {
	if s.bridge != nil {
		return
	}
	a.mu.Lock()
	if a.sessions[s.id] == s {
		delete(a.sessions, s.id)
	}
	a.mu.Unlock()
}

// noResultText is the result drawn on replay for a recorded call whose
// result was never recorded (conch stopped while it ran).
const noResultText = "Error: no result was recorded for this call (conch stopped before it finished)"

// replay sends the updates of recorded records with snapshot snap; each
// call is drawn in the cwd it ran in.
func (a *Agent) replay(sid string, recs []record, snap Snapshot) {
	bridges := map[string]*Bridge{}
	bridgeFor := func(cwd string) *Bridge {
		b := bridges[cwd]
		if b == nil {
			s := snap
			s.Cwd = cwd
			b = NewBridge(s)
			bridges[cwd] = b
		}
		return b
	}
	type call struct {
		tool string
		args json.RawMessage
		b    *Bridge
	}
	calls := map[string]call{}
	var open []string // calls awaiting their result, in order
	flush := func() {
		for _, id := range open {
			if c, ok := calls[id]; ok {
				a.send(sid, c.b.Result(sdk.ToolCallId(id), c.tool, c.args, []string{noResultText}, true))
				delete(calls, id)
			}
		}
		open = open[:0]
	}
	cwd := snap.Cwd
	for _, r := range recs {
		switch r.Type {
		case recSession:
			if r.Cwd != "" {
				cwd = r.Cwd
			}
		case recPrompt:
			flush()
			a.send(sid, sdk.UpdateUserMessageText(r.Text))
		case recCall:
			callCwd := r.Cwd
			if callCwd == "" {
				callCwd = cwd
			}
			c := call{tool: r.Tool, args: r.Args, b: bridgeFor(callCwd)}
			calls[r.ToolCallID] = c
			open = append(open, r.ToolCallID)
			a.send(sid, c.b.Call(sdk.ToolCallId(r.ToolCallID), c.tool, c.args))
		case recResult:
			c, ok := calls[r.ToolCallID]
			if !ok {
				a.log.Warn("acp: skipping a session record", "session", sid, "reason", "result for an unknown call "+r.ToolCallID)
				continue
			}
			delete(calls, r.ToolCallID)
			a.send(sid, c.b.ResultCard(sdk.ToolCallId(r.ToolCallID), c.tool, c.args, r.Texts, r.IsError, r.Card))
		case recMessage:
			a.send(sid, sdk.UpdateAgentMessageText(r.Text))
		}
	}
	flush()
}

// nextCallNumber is one more than the highest call-<N> id recorded.
func nextCallNumber(recs []record) int {
	next := 1
	for _, r := range recs {
		if r.Type != recCall {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(r.ToolCallID, "call-")); err == nil && n >= next {
			next = n + 1
		}
	}
	return next
}

// Prompt runs the prompt's command through the session's tools, drawing
// its card, and answers end_turn, or cancelled after session/cancel.
func (a handler) Prompt(ctx context.Context, p sdk.PromptRequest) (_ sdk.PromptResponse, err error) {
	if !a.enter() {
		return sdk.PromptResponse{}, errShuttingDown
	}
	defer a.running.Done()
	defer a.promptDone(string(p.SessionId))
	defer a.guard("session/prompt", &err)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.mu.Lock()
	s := a.sessions[string(p.SessionId)]
	turn := a.nextTurn
	a.nextTurn++
	if s != nil {
		s.cancels[turn] = cancel
	}
	if ar := a.arrivals[string(p.SessionId)]; ar != nil {
		// A session/cancel read after this prompt and before it got
		// here cancels it now.
		ar.started++
		if ar.started <= ar.cancelTo {
			cancel()
		}
	}
	a.mu.Unlock()
	if s == nil {
		return sdk.PromptResponse{}, resourceNotFound(p.SessionId)
	}
	defer func() {
		a.mu.Lock()
		delete(s.cancels, turn)
		a.mu.Unlock()
	}()

	s.turn.Lock()
	defer s.turn.Unlock()
	if s.bridge == nil { // a session/load of it failed or is not done
		return sdk.PromptResponse{}, resourceNotFound(p.SessionId)
	}
	text := promptText(p.Prompt)
	a.record(s, record{Type: recPrompt, Text: text})
	c, reply := parsePrompt(text)
	if reply != "" {
		a.message(s, reply)
		return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
	}
	id := "call-" + strconv.Itoa(s.next)
	s.next++
	a.record(s, record{Type: recCall, ToolCallID: id, Tool: c.tool, Args: c.draw, Cwd: s.cwd})
	a.send(s.id, s.bridge.Call(sdk.ToolCallId(id), c.tool, c.draw))

	// The user who cancels a command still sees what it had printed.
	co := &tools.CallOptions{
		KeepAborted: true,
		Approver:    permissionAsker{conn: a.conn, session: s.id, call: sdk.ToolCallId(id)},
	}
	// A terminal card fills as the command prints. The final report is
	// held back for the result update, which carries the rest with the
	// exit; the card's whole content is recorded so a replay draws it
	// again.
	var card strings.Builder
	var rest *string
	if _, ok := s.bridge.LiveOutput(sdk.ToolCallId(id), ""); ok {
		co.Output = func(data string, final bool) {
			card.WriteString(data)
			if final {
				rest = &data
				return
			}
			if u, ok := s.bridge.LiveOutput(sdk.ToolCallId(id), data); ok {
				a.send(s.id, u)
			}
		}
	}
	r := a.ts.Call(ctx, tools.Session{ID: s.id, Cwd: s.cwd}, c.tool, c.exec, co)

	res := record{Type: recResult, ToolCallID: id, Texts: []string{r.Text}, IsError: r.IsError}
	if rest != nil {
		res.Card = sdk.Ptr(card.String())
	}
	a.record(s, res)
	a.send(s.id, s.bridge.ResultCard(sdk.ToolCallId(id), c.tool, c.draw, []string{r.Text}, r.IsError, rest))
	a.notices(s, r.Notices)
	if ctx.Err() != nil {
		return sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}, nil
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

// Cancel cancels the session's prompts in flight: a running command is
// killed and its prompt answers cancelled. (Serve cancels as it reads a
// session/cancel, queued prompts included, see cancelRead; this is for a
// cancel sent as a request.)
func (a handler) Cancel(ctx context.Context, p sdk.CancelNotification) (err error) {
	defer a.guard("session/cancel", &err)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancelLocked(string(p.SessionId))
	return nil
}

// cancelLocked cancels the prompts of session sid that have begun.
func (a *Agent) cancelLocked(sid string) {
	s := a.sessions[sid]
	if s == nil {
		a.log.Debug("acp: cancel for an unknown session", "session", sid)
		return
	}
	for _, cancel := range s.cancels {
		cancel()
	}
}

// promptRead notes a session/prompt read from the input, and queues it
// while another prompt of its session is with the SDK (turnOrder).
func (a *Agent) promptRead(sid string, id *json.RawMessage, line []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed { // passed on to fail: the SDK reads no more
		return true
	}
	ar := a.arrivals[sid]
	if ar == nil {
		ar = &arrival{}
		a.arrivals[sid] = ar
	}
	ar.read++
	if !ar.busy {
		ar.busy = true
		return true
	}
	ar.queue = append(ar.queue, queuedPrompt{id: id, line: bytes.Clone(line)})
	return false
}

// promptDone passes the next queued prompt of session sid to the SDK as
// a prompt of it returns (the queue's turn), unless the agent is shutting
// down, which answers the queue itself.
func (a *Agent) promptDone(sid string) {
	a.mu.Lock()
	ar := a.arrivals[sid]
	if ar == nil || a.closed {
		a.mu.Unlock()
		return
	}
	if len(ar.queue) == 0 {
		ar.busy = false
		if ar.started >= ar.read {
			delete(a.arrivals, sid)
		}
		a.mu.Unlock()
		return
	}
	next := ar.queue[0]
	ar.queue = ar.queue[1:]
	a.mu.Unlock()
	// The input ends only as the agent does: the SDK will not see this
	// prompt, so it is answered here.
	if _, err := a.input.Write(next.line); err != nil {
		a.answerCancelled(next)
	}
}

// answerCancelled answers a queued prompt that will not run: cancelled,
// as a prompt in flight answers when the agent ends.
func (a *Agent) answerCancelled(q queuedPrompt) {
	if q.id == nil {
		return
	}
	b, err := json.Marshal(struct {
		JSONRPC string             `json:"jsonrpc"`
		ID      json.RawMessage    `json:"id"`
		Result  sdk.PromptResponse `json:"result"`
	}{"2.0", *q.id, sdk.PromptResponse{StopReason: sdk.StopReasonCancelled}})
	if err == nil {
		_, err = a.output.Write(append(b, '\n'))
	}
	if err != nil {
		a.log.Debug("acp: a queued prompt was not answered", "id", string(*q.id), "err", err)
	}
}

// cancelRead cancels, as soon as a session/cancel is read from the input,
// every prompt of the session read before it: those that have begun now,
// the others when they begin (turnOrder). A prompt read after it is not
// cancelled, however late the SDK would have delivered the cancel.
func (a *Agent) cancelRead(sid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ar := a.arrivals[sid]; ar != nil {
		ar.cancelTo = ar.read
	}
	a.cancelLocked(sid)
}

// Notify tells the agent that a completion notice is pending for the
// session owner: it is sent as an agent message as soon as the session
// is idle (a prompt in flight sends its own notices with its result).
// Pass it as the task runtime's OnNotice hook, so that a finished
// background task is announced without waiting for the next prompt.
// It returns at once.
func (a *Agent) Notify(owner string) {
	if !a.enter() {
		return
	}
	go func() {
		defer a.running.Done()
		var err error // a panic is logged, not fatal, as in the handlers
		defer a.guard("notify", &err)
		a.mu.Lock()
		s := a.sessions[owner]
		a.mu.Unlock()
		if s == nil {
			return
		}
		s.turn.Lock()
		defer s.turn.Unlock()
		if s.bridge == nil {
			return
		}
		a.notices(s, a.ts.Notices(s.id))
	}()
}

// notices tells the user of finished tasks, naming the /output command
// to read each (the person at the prompt types commands, not tool calls).
func (a *Agent) notices(s *session, notices []tools.Notice) {
	if len(notices) == 0 {
		return
	}
	texts := make([]string, len(notices))
	for i, n := range notices {
		texts[i] = tools.NoticeText(n.Task, "`/output "+n.TaskID+"`")
	}
	a.message(s, strings.Join(texts, "\n\n"))
}

// message sends text as an agent message chunk and records it.
func (a *Agent) message(s *session, text string) {
	a.record(s, record{Type: recMessage, Text: text})
	a.send(s.id, sdk.UpdateAgentMessageText(text))
}

// record appends r to the session's record; a failure is logged, not
// fatal: the session goes on unrecorded rather than stops.
func (a *Agent) record(s *session, r record) {
	if s.rec == nil {
		return
	}
	if err := s.rec.write(r); err != nil {
		a.log.Warn("acp: recording the session", "session", s.id, "err", err)
	}
}

// send sends one session/update. It is sent even after a cancel: ACP
// expects the final updates of a cancelled turn.
func (a *Agent) send(sid string, u sdk.SessionUpdate) {
	err := a.conn.SessionUpdate(context.Background(), sdk.SessionNotification{SessionId: sdk.SessionId(sid), Update: u})
	if err != nil {
		a.log.Debug("acp: session/update not sent", "session", sid, "err", err)
	}
}

// The methods below are not offered (not advertised at initialize).

func (a handler) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodAuthenticate)
}

func (a handler) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionClose)
}

func (a handler) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionList)
}

func (a handler) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionResume)
}

func (a handler) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionSetConfigOption)
}

func (a handler) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, sdk.NewMethodNotFound(sdk.AgentMethodSessionSetMode)
}

var (
	_ sdk.Agent       = handler{}
	_ sdk.AgentLoader = handler{}
)
