//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestMain runs the tests with no user configuration file (the default
// file is looked for under an empty directory), then removes the built
// binary and fails the run if goroutines leaked.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conch-config-")
	if err == nil {
		// Searchable by all: a conch run as an unprivileged user must
		// find no file there, not fail to look.
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	testutil.VerifyTestMain(m, func() { os.RemoveAll(dir) }, containertest.Setup())
}

// logBuffer collects output written from several goroutines.
type logBuffer = testutil.Buffer

func newLogBuffer(t *testing.T, what string) *logBuffer {
	l := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s logs:\n%s", what, l.String())
		}
	})
	return l
}

// serverOptions configure a server under test.
type serverOptions struct {
	marker  string
	yieldMs int
	args    []string // more flags of conch serve (stdio only)
	env     []string // more variables of conch serve (stdio only)
	client  *mcp.ClientOptions
	roots   []*mcp.Root
	wrap    func(*exec.Cmd) // runs conch serve under a wrapper (stdio only; see withoutUserNS)
}

// transport starts a conch MCP server and connects a go-sdk client to it.
// The server and the client end when the test does, and then no process
// with the marker may be left.
type transport struct {
	name string
	// start returns the client session and the pid of the server process
	// (0 when the server runs in the test process).
	start func(t *testing.T, o serverOptions) (*mcp.ClientSession, int)
}

var transports = []transport{
	{"stdio", startStdio},
	{"http", startHTTP},
}

func newClient(o serverOptions) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, o.client)
	if len(o.roots) > 0 {
		c.AddRoots(o.roots...)
	}
	return c
}

// startStdio runs the built binary as `conch serve` on stdio.
func startStdio(t *testing.T, o serverOptions) (*mcp.ClientSession, int) {
	t.Helper()
	t.Cleanup(func() { testutil.AssertNoProcesses(t, o.marker) })
	args := []string{"serve"}
	if o.yieldMs != 0 {
		args = append(args, "--yield-ms", fmt.Sprint(o.yieldMs))
	}
	args = append(args, o.args...)
	cmd := exec.Command(testutil.ConchBinary(t), args...)
	cmd.Env = append(testutil.Env(o.marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, o.env...)
	cmd.Stderr = newLogBuffer(t, "conch serve")
	if o.wrap != nil {
		o.wrap(cmd)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := newClient(o).Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyMCP)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close stdio session: %v", err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("conch serve exited with %d, want 0", code)
		}
	})
	return cs, cmd.Process.Pid
}

// startHTTP serves an in-process mcpserver over httptest, wired like
// conch serve.
func startHTTP(t *testing.T, o serverOptions) (*mcp.ClientSession, int) {
	t.Helper()
	t.Cleanup(func() { testutil.AssertNoProcesses(t, o.marker) })
	hs, _ := newHTTPStack(t, o)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := newClient(o).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hs.Client()}, legacyMCP)
	if err != nil {
		t.Fatalf("connect over http: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close http session: %v", err)
		}
	})
	return cs, 0
}

// newHTTPStack builds what conch serve --http builds, in this process,
// with the marker in the commands' environment; the server's Client
// sends its token.
func newHTTPStack(t *testing.T, o serverOptions) (*httptest.Server, *mcpserver.Server) {
	t.Helper()
	ex, err := local.New(&local.Options{Environ: testutil.Env(o.marker), SpillParent: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rt := tasks.New(nil)
	yield := time.Duration(o.yieldMs) * time.Millisecond
	if yield == 0 {
		yield = 45 * time.Second // conch serve's default, which the bash description states
	}
	ts := tools.New(ex, &tools.Options{
		Tasks:      rt,
		Home:       t.TempDir(),
		YieldAfter: yield,
		MaxWait:    mcpserver.MaxWait,
	})
	logs := newLogBuffer(t, "mcpserver")
	const token = "e2e-token"
	srv := mcpserver.New(ts, &mcpserver.Options{Token: token, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	hs := httptest.NewServer(srv.HTTPHandler())
	hs.Client().Transport = tokenTransport{token, hs.Client().Transport.(*http.Transport)}
	t.Cleanup(func() {
		srv.Close()
		hs.CloseClientConnections()
		hs.Close()
		rt.Close()
		if err := ex.Close(); err != nil {
			t.Errorf("executor close: %v", err)
		}
	})
	return hs, srv
}

// callTool calls tool name with args and fails the test on a protocol
// error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return r
}

// texts returns the text blocks of r.
func texts(t *testing.T, r *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, c := range r.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content block %T, want text", c)
		}
		out = append(out, tc.Text)
	}
	return out
}

// text returns the only text block of r.
func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	ts := texts(t, r)
	if len(ts) != 1 {
		t.Fatalf("%d content blocks %q, want 1", len(ts), ts)
	}
	return ts[0]
}

func bash(command string) map[string]any {
	return map[string]any{"command": command, "description": "Run a test command"}
}

func bashBG(command string) map[string]any {
	a := bash(command)
	a["run_in_background"] = true
	return a
}

// liveProcesses returns the processes with marker, other than the server.
func liveProcesses(marker string, server int) []string {
	var out []string
	for _, p := range testutil.Processes(marker) {
		if p.Pid != server {
			out = append(out, fmt.Sprintf("%d %s", p.Pid, testutil.Cmdline(p.Pid)))
		}
	}
	return out
}

// waitProcess waits until a process with marker whose command line is
// exactly cmd runs. (Not one that merely contains it: the bash -c that
// will start it contains it too, and would be seen before it ran a line.)
// The wait ends when the process runs; its bound only turns a process
// that never comes into a failure, so it is generous: starting conch, its
// init and bash took over 5 s at a load of 36.
func waitProcess(t *testing.T, marker string, server int, cmd string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "a process running "+cmd, func() bool {
		for _, p := range testutil.Processes(marker) {
			if p.Pid != server && testutil.Cmdline(p.Pid) == cmd {
				return true
			}
		}
		return false
	})
}

// waitNoProcesses waits until no process with marker but the server is
// left.
func waitNoProcesses(t *testing.T, marker string, server int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := liveProcesses(marker, server)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still alive after %v: %q", d, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// legacyMCP pins a Go SDK client to MCP 2025-11-25, the revision with
// sessions this test was written for: the SDK offers 2026-07-28 first,
// which conch serves too (docs/transports.md#protocol-revisions).
var legacyMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
