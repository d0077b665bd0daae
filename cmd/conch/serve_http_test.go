package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestServeHTTPNonLoopbackToken binds the binary to every interface (a
// non-loopback bind, so a token is required) and talks to it over the
// loopback address only (tests send no traffic to other addresses): a
// request without the token (or with another) gets 401 and runs nothing,
// whether it opens a session or calls a tool in one; with the token it
// works.
func TestServeHTTPNonLoopbackToken(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	const token = "non-loopback-secret"
	srv := startHTTPServe(t, marker, "0.0.0.0:0", "CONCH_TOKEN="+token)
	_, port, err := net.SplitHostPort(srv.listen())
	if err != nil {
		t.Fatalf("listening on %q: %v", srv.url, err)
	}
	c := rawHTTP{t: t, url: "http://" + net.JoinHostPort("127.0.0.1", port) + "/mcp"}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	for _, tok := range []string{"", "wrong", token + "x"} {
		c.token = tok
		if resp, body := c.post(initialize); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("initialize with token %q: %s %q, want 401", tok, resp.Status, body)
		}
	}
	c.token = token
	resp, body := c.post(initialize)
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.session == "" {
		t.Fatalf("initialize with the token: %s %q", resp.Status, body)
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	flag := filepath.Join(t.TempDir(), "ran")
	callBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch ` + flag + `; echo ran","description":"x"}}}`
	for _, tok := range []string{"", "wrong"} {
		c.token = tok
		if resp, body := c.post(callBody); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("tools/call with token %q: %s %q, want 401", tok, resp.Status, body)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(flag); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused request ran its command (%v)", err)
	}
	c.token = token
	if resp, body := c.post(callBody); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"text":"ran\n"`) {
		t.Errorf("tools/call with the token: %s %q", resp.Status, body)
	}

	srv.stop()
}

// httpServe is a `conch serve --http` binary under test.
type httpServe struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string // http://ADDR/mcp, from the server's log
	out    strings.Builder
	exited chan error
}

// startHTTPServe starts `conch serve --http addr` with the test's marker
// and env, waits until it logs its URL, and kills it at cleanup if a test
// did not stop it.
func startHTTPServe(t *testing.T, marker, addr string, env ...string) *httpServe {
	t.Helper()
	s := &httpServe{t: t, exited: make(chan error, 1)}
	s.cmd = exec.Command(conchBin, "serve", "--http", addr)
	s.cmd.Env = append(append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir()), env...)
	logs := newLogBuffer(t, "conch serve --http")
	s.cmd.Stderr = logs
	s.cmd.Stdout = &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-s.exited:
			s.exited <- err
		default:
			s.cmd.Process.Kill()
		}
	})
	waitFor(t, 5*time.Second, "the listening address in the logs", func() bool {
		_, rest, ok := strings.Cut(logs.String(), "url=")
		if ok {
			s.url, _, ok = strings.Cut(rest, " ")
		}
		return ok
	})
	return s
}

// listen is the address the server listens on.
func (s *httpServe) listen() string {
	return strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/mcp")
}

// stop sends SIGTERM and checks that the server exits 0 within 10 s and
// wrote nothing on stdout.
func (s *httpServe) stop() {
	s.t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
		if err != nil {
			s.t.Errorf("conch serve --http: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatal("conch serve --http did not exit within 10s")
	}
	if s.out.Len() > 0 {
		s.t.Errorf("stdout: %q, want nothing", s.out.String())
	}
}

// rawHTTP speaks streamable HTTP by hand.
type rawHTTP struct {
	t              *testing.T
	url            string
	session, token string
}

func (c *rawHTTP) post(body string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, strings.NewReader(body))
	req.Close = true // no idle connection outlives the test
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestServeHTTPAddrRefused: an --http address conch cannot listen on is
// refused at start with a message naming the flag: a port that is no
// port at once (exit 2, like any bad flag value), an address in use when
// the listen fails (exit 1); nothing is served either way.
func TestServeHTTPAddrRefused(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		addr string
		code int
		want string
	}{
		{"127.0.0.1:99999", 2, `invalid value "127.0.0.1:99999" for flag -http: `},
		{"127.0.0.1:abc", 2, `invalid value "127.0.0.1:abc" for flag -http: `},
		{"localhost:-1", 2, `invalid value "localhost:-1" for flag -http: `},
		{busy.Addr().String(), 1, "--http " + busy.Addr().String() + ": "},
	} {
		cmd := exec.Command(conchBin, "serve", "--http", c.addr)
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan struct{})
		go func() {
			cmd.Run()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("serve --http %s: still running after 5s", c.addr)
			continue
		}
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("serve --http %s: exit %d\nstdout %q\nstderr %q\nwant exit %d and %q in stderr", c.addr, code, stdout.String(), stderr.String(), c.code, c.want)
		}
	}
}
