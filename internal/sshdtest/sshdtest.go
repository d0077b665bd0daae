//go:build linux

// Package sshdtest starts real OpenSSH servers for tests: Debian's sshd on
// 127.0.0.1 at a free port, with its own host key and configuration,
// letting the test's own key log in as an unprivileged user.
//
// It needs root (to start sshd and create the user) and
// /usr/sbin/sshd (apt-get install openssh-server); .ci/run provides both.
package sshdtest

import (
	"bytes"
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
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/conch-dev/conch/internal/testutil"
)

// User is the unprivileged user the tests log in as.
const User = "conchtest"

var userOnce sync.Once

// EnsureUser creates User if it does not exist: a login shell, no
// password, not locked ('*'), so that only keys log in. It fails t
// unless it runs as root with sshd installed.
func EnsureUser(t testing.TB) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("sshdtest: these tests start sshd and log in as another user: run them as root (CI does)")
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Fatal("sshdtest: no /usr/sbin/sshd: apt-get install -y openssh-server (.ci/run does)")
	}
	userOnce.Do(func() {
		if _, err := user.Lookup(User); err == nil {
			return
		}
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/bash", User).CombinedOutput(); err != nil {
			t.Fatalf("sshdtest: useradd: %v: %s", err, out)
		}
		if out, err := exec.Command("usermod", "-p", "*", User).CombinedOutput(); err != nil {
			t.Fatalf("sshdtest: usermod: %v: %s", err, out)
		}
	})
	u, err := user.Lookup(User)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Server is a running sshd.
type Server struct {
	// Dir is world-readable: the configuration, the keys.
	Dir  string
	Port int
	// HostKey is the server's key.
	HostKey ssh.Signer
	// ClientKey is the private key file authorised to log in as User.
	ClientKey string
	// Cache is XDG_CACHE_HOME of the server's sessions, owned by User: a
	// deployed agent lives there, and its path names this server.
	Cache string
	// Log is sshd's log (shown when the test fails).
	Log *testutil.Buffer
}

// Start starts sshd for the rest of the test. extra lines go first in its
// configuration (sshd takes the first value of a keyword, so they win).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	u := EnsureUser(t)
	os.MkdirAll("/run/sshd", 0o755)
	dir, err := os.MkdirTemp("", "conch-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // the login, as User, reads authorized_keys here
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Dir: dir, Log: new(testutil.Buffer), Cache: filepath.Join(dir, "cache")}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Mkdir(s.Cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s.Cache, uid, gid); err != nil {
		t.Fatal(err)
	}

	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	s.HostKey, _ = ssh.NewSignerFromKey(hostPriv)
	writeKey(t, filepath.Join(dir, "host_ed25519"), hostPriv)
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	s.ClientKey = filepath.Join(dir, "id_ed25519")
	writeKey(t, s.ClientKey, clientPriv)
	sshPub, _ := ssh.NewPublicKey(clientPub)
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(sshPub), 0o644); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := strings.Join(append(extra,
		fmt.Sprintf("ListenAddress 127.0.0.1:%d", s.Port),
		"HostKey "+filepath.Join(dir, "host_ed25519"),
		"AuthorizedKeysFile "+filepath.Join(dir, "authorized_keys"),
		"PidFile none", "StrictModes no", "UsePAM no", "PubkeyAuthentication yes",
		"PasswordAuthentication no", "KbdInteractiveAuthentication no",
		"PermitRootLogin prohibit-password", "AllowTcpForwarding no", "X11Forwarding no",
		"PrintMotd no", "LogLevel VERBOSE", "MaxSessions 20",
		// One SetEnv line: sshd takes the first. SHLVL=1 makes the
		// login's bash a nested shell, which reads no ~/.bashrc: Debian
		// builds bash to source it for a command sshd starts, and the
		// tests must not depend on (or wait for) the login user's rc
		// files, which may be anything; root's on a developer machine
		// can start a version manager, a second or more per session.
		"SetEnv XDG_CACHE_HOME="+s.Cache+" SHLVL=1",
	), "\n") + "\n"
	cfgPath := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/sshd", "-t", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: %v: %s", err, out)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = s.Log, s.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.Log.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", s.Addr())
		if err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd does not listen: %v\n%s", err, s.Log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// KnownHostsLine is the known_hosts line of this server's key reached at
// 127.0.0.1:port.
func (s *Server) KnownHostsLine(port int) string {
	addr := knownhosts.Normalize(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	return knownhosts.Line([]string{addr}, s.HostKey.PublicKey())
}

// AgentsLeft lists the live processes running an agent deployed through
// this server (their command line names its Cache).
func (s *Server) AgentsLeft() []string { return s.agentsLeft("") }

// agentsLeft is AgentsLeft, only those whose environment holds the
// entry env ("NAME=value") when env is not empty.
func (s *Server) agentsLeft(env string) []string {
	out, _ := exec.Command("ps", "-eo", "pid=,args=").Output()
	var left []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, s.Cache) || strings.Contains(l, "<defunct>") {
			continue
		}
		l = strings.TrimSpace(l)
		if env != "" {
			pid, _, _ := strings.Cut(l, " ")
			b, err := os.ReadFile("/proc/" + pid + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, b...), []byte("\x00"+env+"\x00")) {
				continue
			}
		}
		left = append(left, l)
	}
	return left
}

// AssertNoAgents waits up to 5 s for every agent deployed through s to be
// gone, and fails t if one is left.
func (s *Server) AssertNoAgents(t testing.TB) { t.Helper(); s.AssertNoAgentsWith(t, "") }

// AssertNoAgentsWith is AssertNoAgents for the agents whose environment
// holds env ("NAME=value"): those of one client, where several run at
// once.
func (s *Server) AssertNoAgentsWith(t testing.TB, env string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := s.agentsLeft(env)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("sshdtest: agents left on the host: %q", left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client is an SSH client configuration: a config file of aliases and a
// known_hosts file.
type Client struct {
	Dir, SSHConfig, KnownHosts string
}

// NewClient makes an empty client configuration in dir.
func NewClient(dir string) *Client {
	return &Client{Dir: dir, SSHConfig: filepath.Join(dir, "config"), KnownHosts: filepath.Join(dir, "known_hosts")}
}

// Alias adds a Host entry name for s reached at 127.0.0.1:port (the
// server's own port when 0), logging in as User with s's client key, and
// trusts s's key there.
func (c *Client) Alias(t testing.TB, name string, s *Server, port int) {
	t.Helper()
	if port == 0 {
		port = s.Port
	}
	AppendFile(t, c.SSHConfig, fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n\n",
		name, port, User, s.ClientKey))
	AppendFile(t, c.KnownHosts, s.KnownHostsLine(port)+"\n")
}

// AppendFile appends text to the file at path, creating it (0600).
func AppendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
