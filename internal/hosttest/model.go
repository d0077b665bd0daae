package hosttest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Call is one call of a conch tool that the fake model makes.
type Call struct {
	// Tool is the conch tool's name: "bash", "task_output", ….
	Tool string
	Args map[string]any
}

// Bash is a bash call of command (its description is fixed).
func Bash(command string) Call {
	return Call{Tool: "bash", Args: map[string]any{"command": command, "description": "Run a test command"}}
}

// With returns c with more arguments.
func (c Call) With(kv ...any) Call {
	args := make(map[string]any, len(c.Args)+len(kv)/2)
	for k, v := range c.Args {
		args[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		args[kv[i].(string)] = kv[i+1]
	}
	c.Args = args
	return c
}

// Result is a tool result the fake model received: what a model reads.
type Result struct {
	// Call is the call it answers.
	Call Call
	// Blocks are the texts the host sent, in order: one for Codex (its
	// function_call_output), one per text block of Claude Code's
	// tool_result (or its one string).
	Blocks []string
	// IsError is Claude Code's is_error (Codex sends none).
	IsError bool
}

// Text is the result's blocks, joined as a model reads them.
func (r Result) Text() string { return strings.Join(r.Blocks, "\n") }

// Next gives the fake model's next call once it has the results so far;
// false ends the conversation (the model answers "done").
type Next func(done []Result) (Call, bool)

// Script is a Next that makes calls in order, one a turn.
func Script(calls ...Call) Next {
	return func(done []Result) (Call, bool) {
		if len(done) < len(calls) {
			return calls[len(done)], true
		}
		return Call{}, false
	}
}

// model is what both fakes share: the script, the results, and the
// requests it could not make sense of.
type model struct {
	t    testing.TB
	next Next
	srv  *http.Server
	addr string

	mu       sync.Mutex
	calls    map[string]Call // by tool-call id
	results  []Result
	recorded map[string]bool // tool-call ids whose result is recorded
	problems []string
	requests []string // method and path of each request, in order
}

// serve starts m on 127.0.0.1 with handler h; the server stops when the
// test ends.
func (m *model) serve(h http.Handler) {
	m.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		m.t.Fatalf("fake model: %v", err)
	}
	m.addr = ln.Addr().String()
	m.calls = make(map[string]Call)
	m.recorded = make(map[string]bool)
	m.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.requests = append(m.requests, r.Method+" "+r.URL.Path)
		m.mu.Unlock()
		h.ServeHTTP(w, r)
	})}
	go m.srv.Serve(ln)
	m.t.Cleanup(func() { m.srv.Close() })
}

// record notes the result of tool call id, once.
func (m *model) record(id string, blocks []string, isError bool) {
	if m.recorded[id] {
		return
	}
	c, ok := m.calls[id]
	if !ok {
		return // a tool of the host's own (ToolSearch, WaitForMcpServers)
	}
	m.recorded[id] = true
	m.results = append(m.results, Result{Call: c, Blocks: blocks, IsError: isError})
}

// maxCalls bounds the calls of one conversation: a host that never sends
// a result back must not make the fake call on for ever.
const maxCalls = 100

// decide is the model's next move, under m.mu: its next call and that
// call's id, or false to answer "done".
func (m *model) decide(idPrefix string) (Call, string, bool) {
	if len(m.calls) >= maxCalls {
		m.problem("%d calls, %d results: the host does not answer them", len(m.calls), len(m.results))
		return Call{}, "", false
	}
	if len(m.calls) > len(m.results) {
		// A call whose result did not come back: the host answered it in
		// a form the fake did not record (its problems say which).
		m.problem("call %d got no result the fake could read", len(m.results))
		return Call{}, "", false
	}
	done := append([]Result(nil), m.results...)
	c, ok := m.next(done)
	if !ok {
		return Call{}, "", false
	}
	id := fmt.Sprintf("%s%d", idPrefix, len(m.calls))
	m.calls[id] = c
	return c, id, true
}

func (m *model) problem(format string, args ...any) {
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

// Results are the tool results received so far, in call order.
func (m *model) Results() []Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Result(nil), m.results...)
}

// Problems are the requests the fake could not make sense of.
func (m *model) Problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.problems...)
}

// Requests are the requests the fake received ("POST /v1/messages").
func (m *model) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w     http.ResponseWriter
	named bool // Anthropic names its events; OpenAI's carry only data
}

func newSSE(w http.ResponseWriter, named bool) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, named: named}
}

func (s *sseWriter) event(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the fake's own values
	}
	if s.named {
		fmt.Fprintf(s.w, "event: %s\n", v["type"])
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// mustJSON is v as a JSON string.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
