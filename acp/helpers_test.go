//go:build linux

package acp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestMain runs the tests, removes the conch binary the end-to-end tests
// built, and fails the run if goroutines leaked.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// The official ACP schema, installed from npm in the fixture folder on
// first use.
const (
	schemaFixture = "testdata/schema-fixture"
	schemaPath    = "@agentclientprotocol/sdk/schema/v1/schema.json" // in node_modules
	skipSchemaEnv = "CONCH_SKIP_ACP_SCHEMA"
)

// acpSchema validates messages against the official ACP schema.
type acpSchema struct {
	root *jsonschema.Schema
	defs map[string]*jsonschema.Schema
}

var (
	schemaOnce sync.Once
	schemaVal  *acpSchema
	schemaErr  error
)

// schemaDefs are the definitions the tests validate against.
var schemaDefs = []string{
	"SessionNotification", "InitializeResponse", "NewSessionResponse", "LoadSessionResponse",
	"PromptResponse", "Error", "RequestPermissionRequest", "RequestPermissionResponse",
}

// loadSchema returns the ACP schema, or nil when CONCH_SKIP_ACP_SCHEMA=1.
// A missing fixture fails the test: the schema checks are part of the
// contract, not an extra.
func loadSchema(t testing.TB) *acpSchema {
	t.Helper()
	if os.Getenv(skipSchemaEnv) == "1" {
		return nil
	}
	schemaOnce.Do(func() {
		modules, err := testutil.NPMFixture(schemaFixture)
		if err != nil {
			schemaErr = fmt.Errorf("the ACP JSON schema fixture: %w (or set %s=1 to skip the schema checks)", err, skipSchemaEnv)
			return
		}
		schemaFile := filepath.Join(modules, schemaPath)
		f, err := os.Open(schemaFile)
		if err != nil {
			schemaErr = fmt.Errorf("the ACP JSON schema fixture: %w", err)
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			schemaErr = fmt.Errorf("reading %s: %w", schemaFile, err)
			return
		}
		c := jsonschema.NewCompiler()
		const url = "https://conch.invalid/acp-schema.json"
		if err := c.AddResource(url, doc); err != nil {
			schemaErr = err
			return
		}
		s := &acpSchema{defs: map[string]*jsonschema.Schema{}}
		if s.root, err = c.Compile(url); err != nil {
			schemaErr = fmt.Errorf("compiling the ACP schema: %w", err)
			return
		}
		for _, d := range schemaDefs {
			if s.defs[d], err = c.Compile(url + "#/$defs/" + d); err != nil {
				schemaErr = fmt.Errorf("compiling the ACP schema's %s: %w", d, err)
				return
			}
		}
		schemaVal = s
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schemaVal
}

// check validates raw against definition def.
func (s *acpSchema) check(def string, raw []byte) error {
	if s == nil {
		return nil
	}
	sch := s.defs[def]
	if sch == nil {
		return fmt.Errorf("no schema definition %s", def)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s does not validate against %s: %v", raw, def, err)
	}
	return nil
}

// checkMessage validates one message the agent sent: the whole message
// against the schema's root, and its params or result against its own
// definition. method is the method of the request a response answers.
func (s *acpSchema) checkMessage(raw []byte, m message, method string) error {
	if s == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if err := s.root.Validate(v); err != nil {
		return fmt.Errorf("%s does not validate against the ACP schema: %v", raw, err)
	}
	switch {
	case m.Method == "session/update":
		return s.check("SessionNotification", m.Params)
	case m.Method == "session/request_permission":
		return s.check("RequestPermissionRequest", m.Params)
	case m.Method != "":
		return fmt.Errorf("the agent sent an unexpected request or notification %s", raw)
	case m.Error != nil:
		return s.check("Error", m.Error)
	}
	def := map[string]string{
		"initialize":     "InitializeResponse",
		"session/new":    "NewSessionResponse",
		"session/load":   "LoadSessionResponse",
		"session/prompt": "PromptResponse",
	}[method]
	if def == "" {
		return fmt.Errorf("a result for %q, which has no result schema: %s", method, raw)
	}
	return s.check(def, m.Result)
}

// message is one JSON-RPC message.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
	raw     []byte
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// update is the update of a session/update notification, decoded.
func (m message) update(t testing.TB) map[string]any {
	t.Helper()
	var p struct {
		SessionID string         `json:"sessionId"`
		Update    map[string]any `json:"update"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("session/update params %s: %v", m.Params, err)
	}
	return p.Update
}

// client is a minimal line-based JSON-RPC client of an ACP agent. Every
// message it receives is validated against the ACP schema.
type client struct {
	t      testing.TB
	w      io.WriteCloser
	in     chan message
	schema *acpSchema

	mu      sync.Mutex
	nextID  int
	methods map[string]string // request id → method
}

func newClient(t testing.TB, w io.WriteCloser, r io.Reader) *client {
	c := &client{t: t, w: w, in: make(chan message, 1024), schema: loadSchema(t), methods: map[string]string{}, nextID: 1}
	go func() {
		defer close(c.in)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			var m message
			if err := json.Unmarshal(line, &m); err != nil {
				m = message{Method: "!unparsable", raw: line}
			}
			m.raw = line
			c.in <- m
		}
	}()
	return c
}

// sendRaw writes one line as is.
func (c *client) sendRaw(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatalf("writing to the agent: %v", err)
	}
}

// start sends a request and returns its id.
func (c *client) start(method string, params any) string {
	c.t.Helper()
	c.mu.Lock()
	id := fmt.Sprint(c.nextID)
	c.nextID++
	c.methods[id] = method
	c.mu.Unlock()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
	return id
}

// respond answers the agent's request id with result, which must be a
// valid RequestPermissionResponse (the only request an agent sends here).
func (c *client) respond(id json.RawMessage, result any) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	if err != nil {
		c.t.Fatal(err)
	}
	r, _ := json.Marshal(result)
	if err := c.schema.check("RequestPermissionResponse", r); err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// notify sends a notification.
func (c *client) notify(method string, params any) {
	c.t.Helper()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// recv returns the next message from the agent, validated.
func (c *client) recv(timeout time.Duration) message {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatalf("the agent closed its output")
		}
		if m.Method == "!unparsable" {
			c.t.Fatalf("the agent wrote a line that is not JSON: %q", m.raw)
		}
		c.mu.Lock()
		method := c.methods[string(m.ID)]
		c.mu.Unlock()
		if err := c.schema.checkMessage(m.raw, m, method); err != nil {
			c.t.Error(err)
		}
		return m
	case <-time.After(timeout):
		c.t.Fatalf("no message from the agent within %v", timeout)
	}
	panic("unreachable")
}

// await reads messages until the response to id, returning it and the
// session/update notifications before it.
func (c *client) await(id string) (message, []message) {
	c.t.Helper()
	return c.awaitWithin(id, 60*time.Second)
}

// awaitWithin is await with each message due within d.
func (c *client) awaitWithin(id string, d time.Duration) (message, []message) {
	c.t.Helper()
	var notes []message
	for {
		m := c.recv(d)
		if m.Method == "session/update" {
			notes = append(notes, m)
			continue
		}
		if string(m.ID) != id {
			c.t.Fatalf("waiting for the response to %s, got %s", id, m.raw)
		}
		return m, notes
	}
}

// call sends a request and waits for its response, which must succeed.
func (c *client) call(method string, params any) (json.RawMessage, []message) {
	c.t.Helper()
	m, notes := c.await(c.start(method, params))
	if m.Error != nil {
		c.t.Fatalf("%s failed: %s", method, m.Error)
	}
	return m.Result, notes
}

// callErr sends a request that must fail and returns its error.
func (c *client) callErr(method string, params any) rpcError {
	c.t.Helper()
	m, _ := c.await(c.start(method, params))
	if m.Error == nil {
		c.t.Fatalf("%s succeeded (%s), want an error", method, m.Result)
	}
	var e rpcError
	if err := json.Unmarshal(m.Error, &e); err != nil {
		c.t.Fatal(err)
	}
	return e
}

// eof closes the agent's input and checks that it writes nothing more.
func (c *client) eof() {
	c.t.Helper()
	c.w.Close()
	for m := range c.in {
		c.t.Errorf("message after the end of input: %s", m.raw)
	}
}

func initParams(terminal bool) map[string]any {
	caps := map[string]any{"fs": map[string]any{"readTextFile": false, "writeTextFile": false}}
	if terminal {
		caps["_meta"] = map[string]any{"terminal_output": true}
	}
	return map[string]any{"protocolVersion": 1, "clientCapabilities": caps}
}

func (c *client) initialize(terminal bool) {
	c.t.Helper()
	res, _ := c.call("initialize", initParams(terminal))
	var r struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		c.t.Fatal(err)
	}
	if r.ProtocolVersion != 1 || !r.AgentCapabilities.LoadSession {
		c.t.Fatalf("initialize = %s, want protocolVersion 1 and loadSession", res)
	}
}

func (c *client) newSession(cwd string) string {
	c.t.Helper()
	res, _ := c.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.SessionID == "" {
		c.t.Fatalf("session/new = %s", res)
	}
	return r.SessionID
}

func promptParams(sid, text string) map[string]any {
	return map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}}
}

// prompt sends a prompt and returns its stop reason and updates.
func (c *client) prompt(sid, text string) (string, []map[string]any) {
	c.t.Helper()
	res, notes := c.call("session/prompt", promptParams(sid, text))
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		c.t.Fatal(err)
	}
	return r.StopReason, c.updates(notes, sid)
}

// updates decodes notifications, checking they are for session sid, and
// folds the live output of each terminal card into its final update (see
// foldLive): what a client draws once the call has ended, whatever the
// timing of the live updates.
func (c *client) updates(notes []message, sid string) []map[string]any {
	c.t.Helper()
	return foldLive(c.rawUpdates(notes, sid))
}

// foldLive drops the live updates of terminal cards (tool_call_update
// with no status), prefixing their data to the terminal_output data of
// the call's final update, as a client's terminal accumulates it.
func foldLive(us []map[string]any) []map[string]any {
	var out []map[string]any
	pending := map[any]string{}
	for _, u := range us {
		if u["sessionUpdate"] != "tool_call_update" {
			out = append(out, u)
			continue
		}
		id := u["toolCallId"]
		if u["status"] == nil {
			data, _ := get(u, "_meta", "terminal_output", "data").(string)
			pending[id] += data
			continue
		}
		if p, ok := pending[id]; ok {
			delete(pending, id)
			if to, ok := get(u, "_meta", "terminal_output").(map[string]any); ok {
				to["data"] = p + to["data"].(string)
			}
		}
		out = append(out, u)
	}
	return out
}

// rawUpdates decodes notifications, checking they are for session sid.
func (c *client) rawUpdates(notes []message, sid string) []map[string]any {
	c.t.Helper()
	var out []map[string]any
	for _, n := range notes {
		var p struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(n.Params, &p)
		if p.SessionID != sid {
			c.t.Errorf("update for session %q, want %q: %s", p.SessionID, sid, n.raw)
		}
		out = append(out, n.update(c.t))
	}
	return out
}

// kinds lists the sessionUpdate of each update.
func kinds(us []map[string]any) []string {
	var k []string
	for _, u := range us {
		k = append(k, fmt.Sprint(u["sessionUpdate"]))
	}
	return k
}

// syncBuffer collects output written from several goroutines.
type syncBuffer = testutil.Buffer

// path of a map value, for short assertions: get(u, "_meta", "terminal_exit", "exit_code").
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// jsonString is s as compact JSON, for messages.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return strings.TrimSpace(string(b))
}

// startWith sends a request and, in the same write, the lines after it
// (so that the agent reads them together), and returns its id.
func (c *client) startWith(method string, params any, after ...string) string {
	c.t.Helper()
	c.mu.Lock()
	id := fmt.Sprint(c.nextID)
	c.nextID++
	c.methods[id] = method
	c.mu.Unlock()
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(strings.Join(append([]string{string(b)}, after...), "\n"))
	return id
}
