//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestServeShutdown stops the binary (signals, end of stdin) while it has a running background
// task, a foreground call in flight, a setsid escapee left by a finished
// command and a spill file: it must exit 0 at once, leave no process and
// remove its spill directory.
func TestServeShutdown(t *testing.T) {
	for _, how := range []string{"SIGTERM", "SIGINT", "SIGHUP", "stdin EOF"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			tmp := t.TempDir()
			cmd := exec.Command(testutil.ConchBinary(t), "serve")
			cmd.Env = append(testutil.Env(marker), "TMPDIR="+tmp, "XDG_STATE_HOME="+t.TempDir())
			cmd.Stderr = newLogBuffer(t, "conch serve")
			cmd.WaitDelay = 2 * time.Second
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{})
			go func() {
				waitErr = cmd.Wait()
				close(exited)
			}()
			defer func() {
				select {
				case <-exited:
				default:
					cmd.Process.Kill()
					<-exited
				}
			}()
			client := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: stdout, Writer: stdin}, legacyMCP)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			server := cmd.Process.Pid

			if got := text(t, callTool(t, cs, "bash", bashBG("sleep 1000"))); got != "started background task bash-1" {
				t.Fatalf("background: %q", got)
			}
			if got := text(t, callTool(t, cs, "bash", bash("setsid sleep 1001 >/dev/null 2>&1 &"))); got != "(no output)" {
				t.Fatalf("escapee: %q", got)
			}
			spilled := text(t, callTool(t, cs, "bash", bash(`head -c 100000 /dev/zero | tr '\0' a`)))
			// In the user's spill root (docs/containment.md#spill-files).
			spill, _ := filepath.Glob(filepath.Join(tmp, "conch-*", "conch-spill-*"))
			if len(spill) != 1 || !strings.Contains(spilled, " omitted; full output: "+spill[0]+"/") {
				t.Fatalf("spill dirs %q; result ends %q", spill, spilled[max(0, len(spilled)-200):])
			}
			inflight := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: bash("sleep 1002")})
				inflight <- err
			}()
			for _, p := range []string{"sleep 1000", "sleep 1001", "sleep 1002"} {
				waitProcess(t, marker, server, p)
			}

			start := time.Now()
			switch how {
			case "SIGTERM":
				cmd.Process.Signal(syscall.SIGTERM)
			case "SIGINT":
				cmd.Process.Signal(syscall.SIGINT)
			case "SIGHUP":
				cmd.Process.Signal(syscall.SIGHUP)
			case "stdin EOF":
				stdin.Close()
			}
			select {
			case <-exited:
				if waitErr != nil {
					t.Errorf("conch serve: %v, want exit 0", waitErr)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("conch serve did not exit within 10s")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("shutdown took %v", d)
			}
			<-inflight
			if left := liveProcesses(marker, server); len(left) > 0 {
				t.Errorf("survivors: %q", left)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("left in TMPDIR: %q", names)
			}
		})
	}
}

// TestServeStdoutClosed: a client that closes the server's stdout and
// sends one more request must not kill the server with SIGPIPE (which
// would leave its processes behind): the write fails, the session ends,
// everything is cleaned up and conch exits 0.
func TestServeStdoutClosed(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "serve")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Stderr = newLogBuffer(t, "conch serve")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	send := func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		line, err := lines.ReadString('\n')
		if err != nil || !strings.Contains(line, want) {
			t.Fatalf("read %q (%v), want %q in it", line, err, want)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	expect(`"id":1`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"setsid sleep 1018 >/dev/null 2>&1 & sleep 1019","description":"x","run_in_background":true}}}`)
	expect("started background task bash-1")
	waitProcess(t, marker, cmd.Process.Pid, "sleep 1018")
	waitProcess(t, marker, cmd.Process.Pid, "sleep 1019")
	stdout.Close()
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi","description":"x"}}}`)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("conch serve: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("conch serve did not exit within 10s")
	}
}

// TestServeHTTPBinary starts the binary on a loopback port, checks that
// it answers, and stops it with SIGTERM.
func TestServeHTTPBinary(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	srv := startHTTPServe(t, marker, ":0") // a bare port: loopback
	url := srv.url
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("listening on %s, want 127.0.0.1", url)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
	hc := withToken(srv.fileToken())
	defer hc.CloseIdleConnections()
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, legacyMCP)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, callTool(t, cs, "bash", bashBG("sleep 1003"))); got != "started background task bash-1" {
		t.Errorf("background: %q", got)
	}
	waitProcess(t, marker, srv.cmd.Process.Pid, "sleep 1003")
	srv.stop()
	cs.Close()
}

// TestServeFlags: bad values are refused at start, naming the flag;
// --help goes to stdout.
func TestServeFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"--help"}, 0, "Usage: conch serve [flags]", ""},
		{[]string{"--yield-ms", "-1"}, 2, "", `invalid value "-1" for flag -yield-ms: must be zero or a positive finite number`},
		{[]string{"--timeout-ms", "0"}, 2, "", `invalid value "0" for flag -timeout-ms: must be a positive finite number`},
		{[]string{"--max-tasks", "NaN"}, 2, "", `invalid value "NaN" for flag -max-tasks`},
		{[]string{"--max-result-bytes", "999"}, 2, "", `invalid value "999" for flag -max-result-bytes: must be at least 1000`},
		{[]string{"--cwd", "/nonexistent/dir"}, 2, "", "--cwd /nonexistent/dir: not a directory"},
		{[]string{"--http", "nonsense"}, 2, "", `invalid value "nonsense" for flag -http`},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"`},
	} {
		cmd := exec.Command(testutil.ConchBinary(t), append([]string{"serve"}, c.args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(stdout.String(), c.out) || !strings.Contains(stderr.String(), c.err) {
			t.Errorf("serve %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, %q in stdout, %q in stderr",
				c.args, code, stdout.String(), stderr.String(), c.code, c.out, c.err)
		}
	}
}

// TestServeFlagRanges: a value that passes as a number but that conch
// cannot honour (a fractional or overflowing count, a duration that
// overflows or rounds to nothing) is refused at start, naming the flag,
// rather than silently replaced by a default or refused under the name
// of an internal field.
func TestServeFlagRanges(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"serve", "run"} {
		for _, args := range [][]string{
			{"--max-tasks", "0.5"},
			{"--max-tasks", "1e300"},
			{"--max-output-bytes", "2.5"},
			{"--max-output-bytes", "1e300"},
			{"--max-spill-bytes", "0.5"},
			{"--max-spill-bytes", "1e300"},
			{"--timeout-ms", "1e300"},
			{"--max-timeout-ms", "1e-9"},
			{"--grace-ms", "1e-9"},
			{"--yield-ms", "1e300"},
		} {
			full := append([]string{sub}, args...)
			if sub == "run" {
				full = append(full, "--", "true")
			}
			cmd := exec.Command(testutil.ConchBinary(t), full...)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
			cmd.Stdin = strings.NewReader("") // stdio serve ends at once if it starts
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			want := `invalid value "` + args[1] + `" for flag -` + strings.TrimPrefix(args[0], "--") + ": "
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), want) || stdout.Len() > 0 {
				t.Errorf("%q: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q in stderr", full, code, stdout.String(), stderr.String(), want)
			}
		}
	}
}
