//go:build linux

package mcpserver_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/tools"
)

// The protocol revisions a Go SDK client offers in these tests.
const (
	rev2026 = "2026-07-28"
	rev2025 = "2025-11-25"
)

// dialRev connects c to hs at protocol revision rev, with token (the
// env's when "").
func dialRev(t *testing.T, hs string, token, rev string, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	if token == "" {
		token = testToken
	}
	tr := &mcp.StreamableClientTransport{Endpoint: hs + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect at %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != rev {
		t.Fatalf("negotiated %s, want %s", got, rev)
	}
	return cs
}

func newClient(name string, o *mcp.ClientOptions) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: name, Version: "0"}, o)
}

// TestBothRevisionsHTTP: one server serves a 2026-07-28 client (no
// session: the token is the owner, "http") and a 2025-11-25 client (a
// session of its own) at once; each sees only its own tasks.
func TestBothRevisionsHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	modern := dialRev(t, hs.URL, "", rev2026, newClient("new", nil))
	old := dialRev(t, hs.URL, "", rev2025, newClient("old", nil))

	if got, isErr := call(t, modern, "bash", bash("echo $CONCH_SESSION_ID")); got != "http\n" || isErr {
		t.Errorf("2026-07-28 owner %q (isError %v), want http", got, isErr)
	}
	if got, isErr := call(t, old, "bash", bash("echo $CONCH_SESSION_ID")); got != "http-1\n" || isErr {
		t.Errorf("2025-11-25 session %q (isError %v), want http-1", got, isErr)
	}
	// A task started by a 2026-07-28 request is there for the next
	// request (each is a connection of its own), and only for its owner.
	text, _ := call(t, modern, "bash", bashBG("sleep 60"))
	if !strings.HasPrefix(text, "started background task") {
		t.Fatalf("background: %q", text)
	}
	e.waitRunning(t, "sleep 60")
	if list, _ := call(t, modern, "task_list", map[string]any{}); !strings.Contains(list, "sleep 60") {
		t.Errorf("owner's task_list misses its task: %q", list)
	}
	if list, _ := call(t, old, "task_list", map[string]any{}); strings.Contains(list, "sleep 60") {
		t.Errorf("another session's task_list shows it: %q", list)
	}
	// A second 2026-07-28 client with the same token is the same owner.
	again := dialRev(t, hs.URL, "", rev2026, newClient("new2", nil))
	if list, _ := call(t, again, "task_list", map[string]any{}); !strings.Contains(list, "sleep 60") {
		t.Errorf("same token, same owner: task_list %q", list)
	}
	tools, err := modern.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) == 0 || tools.Tools[0].Name != "bash" {
		t.Fatalf("tools/list at 2026-07-28: %v %v", tools, err)
	}
}

// TestBothRevisionsStdio: the stdio connection is the owner at either
// revision.
func TestBothRevisionsStdio(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{rev2026, rev2025} {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			s := serveStdioRev(t, e, rev, nil)
			if got := s.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %s, want %s", got, rev)
			}
			if got, isErr := call(t, s, "bash", bash("echo $CONCH_SESSION_ID")); got != "stdio\n" || isErr {
				t.Errorf("%q (isError %v), want stdio", got, isErr)
			}
		})
	}
}

// serveStdioRev is serveStdio at protocol revision rev, with client
// options o.
func serveStdioRev(t *testing.T, e *env, rev string, o *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	sr, cw := ioPipe()
	cr, sw := ioPipe()
	served := make(chan error, 1)
	go func() {
		served <- e.srv.ServeStdio(context.Background(), sr, sw)
		sw.Close()
	}()
	cs, err := newClient("conch-test", o).Connect(t.Context(), &mcp.IOTransport{Reader: cr, Writer: cw},
		&mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		<-served
	})
	return cs
}

// TestQuestionsByRoundTrip: at 2026-07-28 a rule's question goes out as
// input_required (the SDK client asks its ElicitationHandler and calls
// again); nothing runs before the answer; yes runs it, no does not. The
// same questions reach a 2025-11-25 client as elicitation/create.
func TestQuestionsByRoundTrip(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{rev2026, rev2025} {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			e := rulesEnv(t, 0)
			hs := e.serveHTTP(t)
			u := newUser()
			cs := dialRev(t, hs.URL, "", rev, newClient("asker", &mcp.ClientOptions{ElicitationHandler: u.handle}))
			dir := t.TempDir()
			file := filepath.Join(dir, "ran")
			args := bash("touch " + file)
			args["workdir"] = dir

			done := callAsync(t, cs, args)
			p := e.question(t, u, file)
			wantMsg := "Allow this command to run?\n\nReason: rule Bash(touch:*)\nDirectory: " + dir + "\nCommand: touch " + file
			if p.Message != wantMsg {
				t.Errorf("message %q, want %q", p.Message, wantMsg)
			}
			u.answer <- &mcp.ElicitResult{Action: "decline"}
			wantResult(t, done, "Error: not run: the user declined touch "+file, true)
			noFile(t, file)

			done = callAsync(t, cs, args)
			e.question(t, u, file)
			u.answer <- accept("Allow once")
			wantResult(t, done, "(no output)", false)
			if !exists(file) {
				t.Error("allowed once, but not run")
			}
		})
	}
}

// rawCall calls bash with a requestState and answer of the caller's
// choosing, without the SDK's retry loop: what a forger sends.
func rawCall(t *testing.T, cs *mcp.ClientSession, args map[string]any, state string, answer *mcp.ElicitResult) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "bash", Arguments: args, RequestState: state}
	if answer != nil {
		p.InputResponses = mcp.InputResponseMap{"question": answer}
	}
	return cs.CallTool(ctx, p)
}

// TestRequestState: a state that was altered, sent by another owner,
// used twice or expired runs nothing and is refused with "invalid
// request state"; the genuine one, from its owner, runs the command.
func TestRequestState(t *testing.T) {
	t.Parallel()
	e := rulesEnvOpts(t, &mcpserver.Options{
		Clients:         []mcpserver.Client{{Name: "alice", Token: "alice-token"}, {Name: "bob", Token: "bob-token"}},
		RequestStateTTL: 4 * time.Second,
	})
	hs := e.serveHTTP(t)
	manual := &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("not asked through the handler")
		}}
	alice := dialRev(t, hs.URL, "alice-token", rev2026, newClient("alice", manual))
	bob := dialRev(t, hs.URL, "bob-token", rev2026, newClient("bob", manual))
	file := filepath.Join(t.TempDir(), "ran")
	args := bash("touch " + file)

	ask := func() string {
		t.Helper()
		r, err := rawCall(t, alice, args, "", nil)
		if err != nil || !r.NeedsInput() || r.RequestState == "" {
			t.Fatalf("first call: %+v, %v; want input_required", r, err)
		}
		if _, ok := r.InputRequests["question"].(*mcp.ElicitParams); !ok {
			t.Fatalf("input requests %+v", r.InputRequests)
		}
		return r.RequestState
	}
	refused := func(what string, cs *mcp.ClientSession, state string) {
		t.Helper()
		_, err := rawCall(t, cs, args, state, accept("Allow once"))
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || je.Message != "invalid request state" {
			t.Errorf("%s: %v; want invalid request state", what, err)
		}
		noFile(t, file)
	}

	st := ask()
	body, sig, _ := strings.Cut(st, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "touch", "touch /tmp/x;", 1))) + "." + sig
	refused("altered", alice, forged)
	refused("another owner", bob, st)
	refused("another command", alice, st+"x")

	// The genuine state, from its owner, with another command line.
	r, err := rawCall(t, alice, bash("touch "+file+"2"), st, accept("Allow once"))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Message != "invalid request state" {
		t.Errorf("another command under the state: %+v, %v", r, err)
	}
	noFile(t, file+"2")

	st = ask()
	r, err = rawCall(t, alice, args, st, accept("Allow once"))
	if err != nil || r.IsError || r.NeedsInput() {
		t.Fatalf("genuine retry: %+v, %v", r, err)
	}
	if !exists(file) {
		t.Fatal("allowed, but not run")
	}
	if err := removeFile(file); err != nil {
		t.Fatal(err)
	}
	refused("used twice", alice, st)

	st = ask()
	time.Sleep(4 * time.Second) // the state's lifetime
	refused("expired", alice, st)
}

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

func exists(file string) bool {
	_, err := os.Stat(file)
	return err == nil
}

func removeFile(file string) error { return os.Remove(file) }

// rulesEnvOpts is rulesEnv with server options.
func rulesEnvOpts(t *testing.T, opts *mcpserver.Options) *env {
	t.Helper()
	r, err := rules.Parse([]string{"Bash(rm -rf:*)"}, []string{"Bash(touch:*)"}, nil, "allow")
	if err != nil {
		t.Fatal(err)
	}
	return newEnvTools(t, opts, tools.Options{Rules: r})
}

// TestNamedClientsIsolated: two named clients of one server, each with
// its token, see only their own tasks at 2026-07-28 (the client is the
// owner); at 2025-11-25 one cannot use the other's session.
func TestNamedClientsIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &mcpserver.Options{
		Clients: []mcpserver.Client{{Name: "alice", Token: "alice-token"}, {Name: "bob", Token: "bob-token", Cwd: t.TempDir()}},
	})
	hs := e.serveHTTP(t)
	alice := dialRev(t, hs.URL, "alice-token", rev2026, newClient("alice", nil))
	bob := dialRev(t, hs.URL, "bob-token", rev2026, newClient("bob", nil))
	if got, _ := call(t, alice, "bash", bash("echo $CONCH_SESSION_ID")); got != "alice\n" {
		t.Errorf("alice's owner %q", got)
	}
	if got, _ := call(t, bob, "bash", bash("echo $CONCH_SESSION_ID")); got != "bob\n" {
		t.Errorf("bob's owner %q", got)
	}
	call(t, alice, "bash", bashBG("sleep 61"))
	call(t, bob, "bash", bashBG("sleep 62"))
	e.waitRunning(t, "sleep 61")
	e.waitRunning(t, "sleep 62")
	la, _ := call(t, alice, "task_list", map[string]any{})
	lb, _ := call(t, bob, "task_list", map[string]any{})
	if !strings.Contains(la, "sleep 61") || strings.Contains(la, "sleep 62") {
		t.Errorf("alice's list: %q", la)
	}
	if !strings.Contains(lb, "sleep 62") || strings.Contains(lb, "sleep 61") {
		t.Errorf("bob's list: %q", lb)
	}
	// bob's kill of every id alice's task may have reaches his own only.
	for _, id := range []string{"bash-1", "bash-2"} {
		call(t, bob, "task_kill", map[string]any{"task_id": id})
	}
	e.waitGone(t, "sleep 62", 10*time.Second)
	if len(e.processes("sleep 61")) == 0 {
		t.Error("alice's task is gone")
	}

	// 2025-11-25: alice's session id with bob's token is not found.
	old := dialRev(t, hs.URL, "alice-token", rev2025, newClient("alice-old", nil))
	if got, _ := call(t, old, "bash", bash("echo $CONCH_SESSION_ID")); !strings.HasPrefix(got, "http-") {
		t.Errorf("old-revision session %q", got)
	}
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer bob-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", old.ID())
	req.Header.Set("Mcp-Protocol-Version", rev2025)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob with alice's session: status %d, want 404", resp.StatusCode)
	}
}

// TestCancelStateless: at 2026-07-28 over HTTP a client that gives up a
// call (its POST) cancels it: the command's process group is killed. The
// owner's next call works.
func TestCancelStateless(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	hs := e.serveHTTP(t)
	cs := dialRev(t, hs.URL, "", rev2026, newClient("canceller", nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 65")})
		done <- err
	}()
	e.waitRunning(t, "sleep 65")
	cancel()
	e.waitGone(t, "sleep 65", 10*time.Second)
	if err := <-done; err == nil {
		t.Error("the cancelled call returned no error")
	}
	if got, _ := call(t, cs, "bash", bash("echo after")); got != "after\n" {
		t.Errorf("after a cancel: %q", got)
	}
}
