//go:build linux

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
	t          *testing.T
	cmd        *exec.Cmd
	url        string // http://ADDR/mcp, from the server's log
	runtimeDir string // its XDG_RUNTIME_DIR
	logs       *logBuffer
	out        strings.Builder
	exited     chan error
}

// startHTTPServe starts `conch serve --http addr` with the test's marker
// and env (XDG_RUNTIME_DIR a fresh directory unless env names one), waits
// until it logs its URL, and kills it at cleanup if a test did not stop
// it.
func startHTTPServe(t *testing.T, marker, addr string, env ...string) *httpServe {
	t.Helper()
	return startHTTPServeAs(t, marker, addr, false, env...)
}

// startHTTPServeAs is startHTTPServe run as the unprivileged user when
// nobody is set (env must then name directories that user can write).
func startHTTPServeAs(t *testing.T, marker, addr string, nobody bool, env ...string) *httpServe {
	t.Helper()
	return startHTTPServeBinary(t, testutil.ConchBinary(t), marker, addr, nobody, env...)
}

// startHTTPServeBinary is startHTTPServeAs with conch's binary at bin.
func startHTTPServeBinary(t *testing.T, bin, marker, addr string, nobody bool, env ...string) *httpServe {
	t.Helper()
	s := &httpServe{t: t, runtimeDir: t.TempDir(), exited: make(chan error, 1)}
	for _, kv := range env {
		if d, ok := strings.CutPrefix(kv, "XDG_RUNTIME_DIR="); ok {
			s.runtimeDir = d
		}
	}
	s.cmd = exec.Command(bin, "serve", "--http", addr)
	s.cmd.Env = append(append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "XDG_RUNTIME_DIR="+s.runtimeDir), env...)
	logs := newLogBuffer(t, "conch serve --http")
	s.logs = logs
	s.cmd.Stderr = logs
	s.cmd.Stdout = &s.out
	if nobody {
		testutil.Unprivileged(t, s.cmd)
	}
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
	// The bound only turns a server that never listens into a failure:
	// the binary took over 5 s to start at a load of 25.
	testutil.WaitFor(t, 30*time.Second, "the listening address in the logs", func() bool {
		_, rest, ok := strings.Cut(logs.String(), "url=")
		if ok {
			s.url, _, ok = strings.Cut(rest, " ")
		}
		return ok
	})
	return s
}

// tokenFile is where the server keeps its token when none is given.
func (s *httpServe) tokenFile() string { return filepath.Join(s.runtimeDir, "conch", "token") }

// fileToken is the token in the server's token file.
func (s *httpServe) fileToken() string {
	s.t.Helper()
	b, err := os.ReadFile(s.tokenFile())
	if err != nil {
		s.t.Fatalf("the token file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// withToken is an HTTP client that sends token on every request.
func withToken(token string) *http.Client {
	return &http.Client{Transport: tokenTransport{token, http.DefaultTransport.(*http.Transport).Clone()}}
}

type tokenTransport struct {
	token string
	rt    *http.Transport
}

func (b tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func (b tokenTransport) CloseIdleConnections() { b.rt.CloseIdleConnections() }

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
		cmd := exec.Command(testutil.ConchBinary(t), "serve", "--http", c.addr)
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

// TestServeHTTPTokenFile: without --token or CONCH_TOKEN the server makes
// a token, writes it to $XDG_RUNTIME_DIR/conch/token (directory 0700,
// file 0600), logs the file's path and never the token, and refuses
// every request without it, from loopback too, whoever sends it (here
// root and uid 65534, the users of one machine that loopback did not
// tell apart). A restart keeps the token; a symlink planted at the
// file's path is replaced, never followed.
func TestServeHTTPTokenFile(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	runtimeDir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(runtimeDir, "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(runtimeDir, "conch", "token")); err != nil {
		t.Fatal(err)
	}
	flag := filepath.Join(t.TempDir(), "ran")
	if err := os.Chmod(filepath.Dir(flag), 0o777); err != nil { // nobody could create it
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

	srv := startHTTPServe(t, marker, "127.0.0.1:0", "XDG_RUNTIME_DIR="+runtimeDir)
	token := srv.fileToken()
	if len(token) != 64 {
		t.Errorf("token %q, want 64 hex digits", token)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	for path, want := range map[string]os.FileMode{filepath.Dir(srv.tokenFile()): os.ModeDir | 0o700, srv.tokenFile(): 0o600} {
		if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want mode %v", path, fi.Mode(), err, want)
		}
	}
	logs := srv.logs.String()
	if want := `msg="HTTP clients must send the bearer token in the token file" tokenFile=` + srv.tokenFile(); !strings.Contains(logs, want) {
		t.Errorf("logs: %s\nwant %q", logs, want)
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token is in the logs")
	}

	// No token, or a wrong one: 401, from root and from nobody.
	users := []*syscall.Credential{nil}
	if os.Getuid() == 0 {
		users = append(users, &syscall.Credential{Uid: 65534, Gid: 65534})
	} else {
		t.Log("not root: the request as another user is not tried")
	}
	callBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"touch ` + flag + `","description":"x"}}}`
	for _, cred := range users {
		for _, auth := range []string{"", "Bearer ", "Bearer wrong"} {
			for _, body := range []string{initialize, callBody} {
				args := []string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", srv.url,
					"-H", "Content-Type: application/json", "-H", "Accept: application/json, text/event-stream", "--data-binary", body}
				if auth != "" {
					args = append(args, "-H", "Authorization: "+auth)
				}
				cmd := exec.Command("curl", args...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
				out, err := cmd.Output()
				if err != nil || string(out) != "401" {
					t.Errorf("as %v, Authorization %q: %s %v, want 401", cred, auth, out, err)
				}
			}
		}
	}
	if _, err := os.Stat(flag); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused request ran its command (%v)", err)
	}
	// With the file's token it works.
	c := rawHTTP{t: t, url: srv.url, token: token}
	if resp, body := c.post(initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize with the token: %s %q", resp.Status, body)
	}
	srv.stop()

	// A restart keeps the token, so that configured clients go on working.
	again := startHTTPServe(t, marker, "127.0.0.1:0", "XDG_RUNTIME_DIR="+runtimeDir)
	if got := again.fileToken(); got != token {
		t.Errorf("after a restart the token is %q, want %q", got, token)
	}
	c = rawHTTP{t: t, url: again.url, token: token}
	if resp, body := c.post(initialize); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize after a restart: %s %q", resp.Status, body)
	}
	again.stop()
}
