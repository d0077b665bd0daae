package sshhost_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/sshhost"
)

// testUser is the unprivileged user the tests log in as; .ci/run creates
// it, and so does ensureUser.
const testUser = "conchtest"

// conchBin is the conch binary built for the tests, deployed as the agent.
var conchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conch-sshhost-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	conchBin = filepath.Join(dir, "conch")
	build := exec.Command("go", "build", "-o", conchBin, "github.com/conch-dev/conch/cmd/conch")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build conch:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	testutil.VerifyTestMain(m)
}

var userOnce sync.Once

// ensureUser creates testUser if it does not exist: a login shell, no
// password, not locked ('*'), so that only keys log in.
func ensureUser(t testing.TB) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests start sshd and log in as another user: run them as root (CI does)")
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Fatal("no /usr/sbin/sshd: apt-get install -y openssh-server (.ci/run does)")
	}
	userOnce.Do(func() {
		if _, err := user.Lookup(testUser); err == nil {
			return
		}
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/bash", testUser).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		if out, err := exec.Command("usermod", "-p", "*", testUser).CombinedOutput(); err != nil {
			t.Fatalf("usermod: %v: %s", err, out)
		}
	})
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// sshd is a real OpenSSH server on 127.0.0.1 for one test.
type sshd struct {
	dir      string // world-readable: config, keys, known_hosts, the agents' cache
	port     int
	hostKey  ssh.Signer
	clientID string // the client's private key file
	cache    string // XDG_CACHE_HOME of the sessions (the agent is deployed there)
	log      *testutil.Buffer
}

// startSSHD starts sshd with its own host key and the test's client key
// authorised for testUser. extra lines go into its configuration.
func startSSHD(t testing.TB, extra ...string) *sshd {
	t.Helper()
	u := ensureUser(t)
	os.MkdirAll("/run/sshd", 0o755)
	dir, err := os.MkdirTemp("", "conch-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &sshd{dir: dir, log: new(testutil.Buffer), cache: filepath.Join(dir, "cache")}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Mkdir(s.cache, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(s.cache, uid, gid)

	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	s.hostKey, _ = ssh.NewSignerFromKey(hostPriv)
	writeKey(t, filepath.Join(dir, "host_ed25519"), hostPriv)
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	s.clientID = filepath.Join(dir, "id_ed25519")
	writeKey(t, s.clientID, clientPriv)
	sshPub, _ := ssh.NewPublicKey(clientPub)
	os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(sshPub), 0o644)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// sshd takes the first value of a keyword: extra lines come first.
	cfg := strings.Join(append(extra,
		fmt.Sprintf("ListenAddress 127.0.0.1:%d", s.port),
		"HostKey "+filepath.Join(dir, "host_ed25519"),
		"AuthorizedKeysFile "+filepath.Join(dir, "authorized_keys"),
		"PidFile none", "StrictModes no", "UsePAM no", "PubkeyAuthentication yes",
		"PasswordAuthentication no", "KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password", "AllowTcpForwarding no", "X11Forwarding no",
		"PrintMotd no", "LogLevel VERBOSE", "MaxSessions 20",
		"SetEnv XDG_CACHE_HOME="+s.cache,
	), "\n") + "\n"
	cfgPath := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfgPath, []byte(cfg), 0o644)
	if out, err := exec.Command("/usr/sbin/sshd", "-t", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: %v: %s", err, out)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.log.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", s.addr())
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen: %v\n%s", err, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func writeKey(t testing.TB, path string, k ed25519.PrivateKey) {
	t.Helper()
	b, err := ssh.MarshalPrivateKey(k, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *sshd) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// knownHostsLine is the known_hosts line of this server at port.
func (s *sshd) knownHostsLine(port int) string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))}, s.hostKey.PublicKey())
}

// agentsLeft lists the live processes running the agent deployed by this
// server (their command line names its cache).
func (s *sshd) agentsLeft() []string {
	out, _ := exec.Command("ps", "-eo", "pid=,args=").Output()
	var left []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, s.cache) && !strings.Contains(l, "<defunct>") {
			left = append(left, strings.TrimSpace(l))
		}
	}
	return left
}

// client is what a test needs to reach its sshd servers: an ssh_config, a
// known_hosts file, options.
type client struct {
	dir        string
	sshConfig  string
	knownHosts string
	stderr     *testutil.Buffer
}

func newClient(t testing.TB) *client {
	dir := t.TempDir()
	c := &client{dir: dir, sshConfig: filepath.Join(dir, "config"), knownHosts: filepath.Join(dir, "known_hosts"),
		stderr: new(testutil.Buffer)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", c.stderr.String())
		}
	})
	return c
}

// alias adds a Host entry for s reached at port (the server's own when 0)
// and trusts its key there.
func (c *client) alias(t testing.TB, name string, s *sshd, port int) {
	if port == 0 {
		port = s.port
	}
	appendFile(t, c.sshConfig, fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n\n",
		name, port, testUser, s.clientID))
	appendFile(t, c.knownHosts, s.knownHostsLine(port)+"\n")
}

func appendFile(t testing.TB, path, s string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func (c *client) options() *sshhost.Options {
	return &sshhost.Options{
		SSHConfig:   c.sshConfig,
		KnownHosts:  []string{c.knownHosts},
		AgentSocket: "none", // the identity files alone
		AgentBinary: conchBin,
		AgentArgs:   []string{"--grace", "500ms"},
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

func waitNoAgents(t *testing.T, s *sshd) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := s.agentsLeft()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("agents left on the host: %q", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(t *testing.T, ex shell.Executor, r shell.Request) shell.Result {
	t.Helper()
	spec, err := ex.Resolve(r)
	if err != nil {
		t.Fatalf("Resolve(%+v): %v", r, err)
	}
	res, err := ex.Run(context.Background(), spec)
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
