//go:build linux

package sshhost_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/sshhost"
)

// testUser is the unprivileged user the tests log in as.
const testUser = sshdtest.User

// TestMain removes the conch binary the tests built (deployed as the
// agent) and fails the run if goroutines leaked.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// sshd is a real OpenSSH server for one test.
type sshd = sshdtest.Server

func startSSHD(t testing.TB, extra ...string) *sshd { return sshdtest.Start(t, extra...) }

// startDeployed is startSSHD for a host that already has this conch
// (preload): for the tests that are not about the upload.
func startDeployed(t testing.TB, extra ...string) *sshd {
	s := startSSHD(t, extra...)
	preload(t, s.Cache, testutil.ConchBinary(t))
	return s
}

// preload puts the agent binary bin where a connection deploys it to a
// host whose cache is cache, as an earlier connection's upload would
// have: a test that is not about the upload (tens of megabytes, a second
// or more on a loaded machine) starts from a host that has this conch.
// The upload has tests of its own (TestDeployWhenMissing,
// TestDeployReplacesOutdated, TestUploadRemovesOldBuilds,
// TestCancelDuringFirstDial). At cleanup it fails t if a connection
// uploaded the agent anyway (an upload renames a new file over it): the
// probe must take the copy for current, or the tests would silently pay
// the upload again.
func preload(t testing.TB, cache, bin string) {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := agentPath(t, cache, bin)
	putAgent(t, path, b)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
			t.Errorf("the preloaded agent %s was replaced (%v): a connection uploaded it again", path, err)
		}
	})
}

// agentPath is where a connection deploys the agent binary bin to a host
// whose cache is cache: conch/conch-<first 16 hex digits of its sha256>.
func agentPath(t testing.TB, cache, bin string) string {
	t.Helper()
	sum, err := remote.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(cache, "conch", "conch-"+sum[:16])
}

// putAgent writes content at path, an agent's path in a host's cache, as
// an upload leaves it: the file and its directory the test user's, 0700.
func putAgent(t testing.TB, path string, content []byte) {
	t.Helper()
	u := sshdtest.EnsureUser(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dir, path} {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// client is what a test needs to reach its sshd servers: an ssh_config, a
// known_hosts file, the agent's stderr.
type client struct {
	*sshdtest.Client
	stderr *testutil.Buffer
	bin    string // the conch binary deployed as the agent
}

func newClient(t testing.TB) *client {
	c := &client{Client: sshdtest.NewClient(t.TempDir()), stderr: new(testutil.Buffer), bin: testutil.ConchBinary(t)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", c.stderr.String())
		}
	})
	return c
}

func (c *client) alias(t testing.TB, name string, s *sshd, port int) { c.Alias(t, name, s, port) }

func appendFile(t testing.TB, path, text string) { sshdtest.AppendFile(t, path, text) }

func (c *client) options() *sshhost.Options {
	return &sshhost.Options{
		SSHConfig:   c.SSHConfig,
		KnownHosts:  []string{c.KnownHosts},
		AgentSocket: "none", // the identity files alone
		AgentBinary: c.bin,
		AgentArgs:   []string{"--grace-ms", "500"},
		Stderr:      c.stderr,
	}
}

// markedExec puts the test's marker in the environment of every command it
// resolves, so that a check for leftovers on the host finds what the
// commands started.
type markedExec struct {
	*remote.Executor
	marker string
}

func (e markedExec) Resolve(r shell.Request) (shell.Spec, error) {
	env := map[string]string{testutil.MarkerEnv: e.marker}
	for k, v := range r.Env {
		env[k] = v
	}
	r.Env = env
	return e.Executor.Resolve(r)
}

// newExec returns an executor of h; at cleanup it closes it and checks
// that neither a command nor an agent is left on the hosts.
func newExec(t *testing.T, h sshhost.Host, o *sshhost.Options, servers ...*sshd) markedExec {
	t.Helper()
	ex, err := sshhost.New(h, o)
	if err != nil {
		t.Fatalf("sshhost.New: %v", err)
	}
	marker := testutil.Marker(t)
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
		for _, s := range servers {
			waitNoAgents(t, s)
		}
	})
	return markedExec{ex, marker}
}

func waitNoAgents(t *testing.T, s *sshd) { s.AssertNoAgents(t) }

func run(t *testing.T, ex shell.Executor, r shell.Request) shell.Result {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve(%+v): %v", r, err)
	}
	res, err := shell.Run(context.Background(), ex, spec)
	if err != nil {
		t.Fatalf("Run(%q): %v", r.Command, err)
	}
	return res
}

func code(r shell.Result) int {
	if r.ExitCode == nil {
		return -1
	}
	return *r.ExitCode
}

// proxy forwards TCP connections to addr until cut: a connection that
// can be dropped mid-command, or silenced (frozen: bytes are swallowed,
// nothing is closed, as when a network path dies without a word).
type proxy struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
	frozen atomic.Bool
}

// forward copies src to dst, swallowing what it reads while frozen.
func (p *proxy) forward(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func newProxy(t *testing.T, addr string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { p.forward(u, c) })
			p.wg.Go(func() { p.forward(c, u) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// cut closes every forwarded connection, as a network failure would.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// lines returns the non-empty lines of s.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

func sshFingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }
