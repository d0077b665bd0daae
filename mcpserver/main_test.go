//go:build linux

package mcpserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// logBuffer collects output written from several goroutines.
type logBuffer = testutil.Buffer

// env is a server under test: an executor whose commands carry the
// test's marker, a task runtime, the tools, and the MCP server over them.
type env struct {
	marker string
	ts     *tools.Toolset
	rt     *tasks.Runtime
	srv    *mcpserver.Server
	logs   *logBuffer
}

// testToken is the bearer token of an env's server unless its options
// name another.
const testToken = "test-token"

// newEnv builds an env that is closed, and checked for survivors, when
// the test ends.
func newEnv(t *testing.T, opts *mcpserver.Options) *env {
	t.Helper()
	return newEnvTools(t, opts, tools.Options{})
}

// newEnvTools is newEnv with tool options (their Tasks and Home are the
// env's).
func newEnvTools(t *testing.T, opts *mcpserver.Options, to tools.Options) *env {
	t.Helper()
	e := &env{marker: testutil.Marker(t), logs: &logBuffer{}}
	t.Cleanup(func() { testutil.AssertNoProcesses(t, e.marker) })
	ex, err := local.New(&local.Options{Environ: testutil.Env(e.marker), SpillParent: t.TempDir(), Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = tasks.New(nil)
	to.Tasks, to.Home = e.rt, t.TempDir()
	e.ts = tools.New(ex, &to)
	o := mcpserver.Options{Token: testToken}
	if opts != nil {
		o = *opts
		if o.Token == "" {
			o.Token = testToken
		}
	}
	o.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.srv = mcpserver.New(e.ts, &o)
	t.Cleanup(func() {
		e.srv.Close()
		e.rt.Close()
		if err := ex.Close(); err != nil {
			t.Errorf("executor close: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", e.logs.String())
		}
	})
	return e
}

// serveHTTP serves the env's HTTP handler on a loopback httptest server
// whose Client sends testToken on requests that carry no Authorization.
func (e *env) serveHTTP(t *testing.T) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(e.srv.HTTPHandler())
	hs.Client().Transport = bearer{testToken, hs.Client().Transport}
	t.Cleanup(func() {
		e.srv.Close() // ends the event streams
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// connect opens a client session over streamable HTTP; it is closed when
// the test ends.
func connect(t *testing.T, hs *httptest.Server, tr *mcp.StreamableClientTransport, roots ...*mcp.Root) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
	c.AddRoots(roots...)
	return dial(t, hs, tr, c)
}

// dial connects c over tr (streamable HTTP to hs); the session is closed
// when the test ends.
func dial(t *testing.T, hs *httptest.Server, tr *mcp.StreamableClientTransport, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	if tr == nil {
		tr = &mcp.StreamableClientTransport{}
	}
	tr.Endpoint = hs.URL + "/mcp"
	if tr.HTTPClient == nil {
		tr.HTTPClient = hs.Client()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, legacyMCP)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (text string, isError bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if len(r.Content) == 0 {
		t.Fatalf("%s: no content", name)
	}
	return r.Content[0].(*mcp.TextContent).Text, r.IsError
}

func bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run a test command"}
}

func bashBG(command string) map[string]any {
	a := bash(command)
	a["run_in_background"] = true
	return a
}

// processes lists the live processes with the env's marker whose command
// line contains cmd.
func (e *env) processes(cmd string) []string {
	var out []string
	for _, p := range testutil.Processes(e.marker) {
		if c := testutil.Cmdline(p.Pid); strings.Contains(c, cmd) {
			out = append(out, fmt.Sprintf("%d %s", p.Pid, c))
		}
	}
	return out
}

func (e *env) waitRunning(t *testing.T, cmd string) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, cmd+" to run", func() bool { return len(e.processes(cmd)) > 0 })
}

func (e *env) waitGone(t *testing.T, cmd string, d time.Duration) {
	t.Helper()
	testutil.WaitFor(t, d, cmd+" to die", func() bool {
		for _, p := range testutil.Processes(e.marker) {
			// A command line that cannot be read (a process in the
			// middle of an exec, as bash -c becomes the command) may
			// still be cmd's.
			if c := testutil.Cmdline(p.Pid); c == "?" || strings.Contains(c, cmd) {
				return false
			}
		}
		return true
	})
}

// bearer adds a bearer token to every request without an Authorization.
type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return b.rt.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// CloseIdleConnections lets httptest.Server.Close close the idle
// connections of the transport under b.
func (b bearer) CloseIdleConnections() {
	if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// legacyMCP pins a Go SDK client to MCP 2025-11-25, the revision with
// sessions this test was written for: the SDK offers 2026-07-28 first,
// which conch serves too (docs/transports.md#protocol-revisions).
var legacyMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
