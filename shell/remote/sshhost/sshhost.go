// Package sshhost reaches a remote host over SSH for shell/remote: it
// connects (through ~/.ssh/config aliases, ProxyJump hops, known_hosts
// checking, the SSH agent and identity files), keeps the connection alive,
// deploys this conch binary to the host when it lacks it, and starts
// `conch agent` there in an SSH session whose stdin and stdout carry the
// agent protocol.
package sshhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
	"golang.org/x/crypto/ssh"
	sshagent "golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/conch-dev/conch/shell/remote"
)

// Host is a configured remote host.
type Host struct {
	// Name is the host as the model and the user know it.
	Name string
	// SSH is "user@host:port" (user and port optional) or an alias of the
	// SSH configuration, whose HostName, User, Port, IdentityFile and
	// ProxyJump are honoured.
	SSH string
	// Cwd is where commands run by default on the host; "" means the
	// remote user's home.
	Cwd string
}

// Defaults of Options.
const (
	DefaultKeepAlive   = 15 * time.Second
	DefaultMaxSessions = 8
)

// Options configure how hosts are reached; a zero field means its default.
type Options struct {
	// SSHConfig is the SSH client configuration file (default
	// ~/.ssh/config; a missing file is no configuration).
	SSHConfig string
	// KnownHosts are the known_hosts files host keys are checked against
	// (default ~/.ssh/known_hosts). There is no way to skip the check.
	KnownHosts []string
	// AcceptNew adds the key of a host that is not yet known to the first
	// KnownHosts file, like OpenSSH's StrictHostKeyChecking=accept-new; a
	// changed key is still refused.
	AcceptNew bool
	// IdentityFiles are tried when the SSH configuration names none
	// (default ~/.ssh/id_ed25519, ~/.ssh/id_ecdsa, ~/.ssh/id_rsa). Keys
	// with a passphrase are skipped; the SSH agent serves those.
	IdentityFiles []string
	// AgentSocket is the SSH agent's socket (default $SSH_AUTH_SOCK);
	// "none" uses no agent.
	AgentSocket string
	// AgentBinary is the conch binary deployed to hosts that lack it
	// (default: this program's executable). It must be built for the
	// host's OS and architecture.
	AgentBinary string
	// AgentArgs are extra arguments of `conch agent` on the host.
	AgentArgs []string
	// Stderr receives the agent's standard error (default: discarded).
	Stderr io.Writer
	// KeepAlive is the interval of keep-alive requests; a connection that
	// does not answer within it is closed, which ends its commands as
	// lost (default 15 s).
	KeepAlive time.Duration
	// MaxSessions caps the SSH sessions open at once on one connection
	// (default 8; OpenSSH's sshd allows 10). All commands share the one
	// session of the agent; deploying takes one more for a moment.
	MaxSessions int
	// Executor configures the remote executor; its Cwd is Host.Cwd.
	Executor remote.Options
}

// New returns an executor for h that reaches it over SSH. It reads the SSH
// configuration now and connects on first use.
func New(h Host, o *Options) (*remote.Executor, error) {
	d, err := NewDialer(h, o)
	if err != nil {
		return nil, err
	}
	var ro remote.Options
	if o != nil {
		ro = o.Executor
	}
	ro.Cwd = h.Cwd
	return remote.New(h.Name, d, &ro)
}

// HostKeyError is a host key that known_hosts does not trust: unknown, or
// different from the one recorded.
type HostKeyError struct {
	Host        string
	Fingerprint string // SHA256:…
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("host %s: host key not trusted (%s); add it with ssh-keyscan or connect once with ssh", e.Host, e.Fingerprint)
}

// PlatformError is a host of another OS or architecture that has no conch
// of its own at Path.
type PlatformError = remote.PlatformError

// target is one SSH server to log in to.
type target struct {
	user, addr string // addr is host:port
	identities []string
	auth       []ssh.AuthMethod
}

// Dialer starts agents on one host. It keeps one SSH connection, made
// again when it died; it implements remote.Dialer and io.Closer.
type Dialer struct {
	name    string
	hops    []target // ProxyJump hops, then the host
	opts    Options
	binHash string // sha256 of AgentBinary, hex

	sessions chan struct{} // one token per open session

	mu       sync.Mutex // serialises dials
	client   *ssh.Client
	closers  []io.Closer    // the client and the clients of its hops
	dead     chan struct{}  // closed when client's connection ended
	bg       sync.WaitGroup // keep-alive and connection watchers
	agentCmd string         // the command that starts the deployed agent
	closed   bool
}

var _ remote.Dialer = (*Dialer)(nil)

// NewDialer resolves h through the SSH configuration and reads the keys.
func NewDialer(h Host, o *Options) (*Dialer, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/"
	}
	if opts.SSHConfig == "" {
		opts.SSHConfig = filepath.Join(home, ".ssh", "config")
	}
	if opts.KnownHosts == nil {
		opts.KnownHosts = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	switch opts.AgentSocket {
	case "":
		opts.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	case "none":
		opts.AgentSocket = ""
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.AgentBinary == "" {
		if opts.AgentBinary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("host %s: find conch's own binary: %w", h.Name, err)
		}
	}
	sum, err := remote.FileSHA256(opts.AgentBinary)
	if err != nil {
		return nil, fmt.Errorf("host %s: checksum of the agent binary: %w", h.Name, err)
	}
	cfg, err := readSSHConfig(opts.SSHConfig)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	d := &Dialer{name: h.Name, opts: opts, binHash: sum, sessions: make(chan struct{}, opts.MaxSessions)}
	if d.hops, err = resolveHops(cfg, h.SSH, home, 0); err != nil {
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	defaults := opts.IdentityFiles
	if defaults == nil {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			defaults = append(defaults, filepath.Join(home, ".ssh", n))
		}
	}
	for i := range d.hops {
		ids := d.hops[i].identities
		if len(ids) == 0 {
			ids = defaults
		}
		d.hops[i].auth = authMethods(ids, opts.AgentSocket)
	}
	return d, nil
}

func readSSHConfig(path string) (*ssh_config.Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &ssh_config.Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ssh config: %w", err)
	}
	cfg, err := ssh_config.DecodeBytes(b)
	if err != nil {
		return nil, fmt.Errorf("parse ssh config %s: %w", path, err)
	}
	return cfg, nil
}

// resolveHops turns spec ("user@host:port" or an alias) into the hops to
// reach it, its own ProxyJump first, each with the identity files its
// configuration names.
func resolveHops(cfg *ssh_config.Config, spec, home string, depth int) ([]target, error) {
	if depth > 8 {
		return nil, fmt.Errorf("ProxyJump of %q nests too deep", spec)
	}
	userName, host, port, err := splitSpec(spec)
	if err != nil {
		return nil, err
	}
	get := func(key string) string {
		v, _ := cfg.Get(host, key)
		return v
	}
	hostName := host
	if v := get("HostName"); v != "" {
		hostName = v
	}
	if userName == "" {
		userName = get("User")
	}
	if userName == "" {
		if u, err := user.Current(); err == nil {
			userName = u.Username
		}
	}
	if port == "" {
		port = get("Port")
	}
	if port == "" {
		port = "22"
	}
	var ids []string
	all, _ := cfg.GetAll(host, "IdentityFile")
	for _, id := range all {
		if strings.HasPrefix(id, "~/") {
			id = filepath.Join(home, id[2:])
		}
		ids = append(ids, id)
	}
	var hops []target
	if jump := get("ProxyJump"); jump != "" && !strings.EqualFold(jump, "none") {
		for _, j := range strings.Split(jump, ",") {
			jh, err := resolveHops(cfg, strings.TrimSpace(j), home, depth+1)
			if err != nil {
				return nil, err
			}
			hops = append(hops, jh...)
		}
	}
	return append(hops, target{user: userName, addr: net.JoinHostPort(hostName, port), identities: ids}), nil
}

// splitSpec splits "user@host:port"; user and port may be absent, and an
// IPv6 host with a port is written [addr]:port.
func splitSpec(spec string) (userName, host, port string, err error) {
	spec = strings.TrimPrefix(spec, "ssh://")
	if i := strings.LastIndex(spec, "@"); i >= 0 {
		userName, spec = spec[:i], spec[i+1:]
	}
	host = spec
	if h, p, err := net.SplitHostPort(spec); err == nil {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", "", "", fmt.Errorf("bad port in %q", spec)
		}
		host, port = h, p
	}
	if host == "" {
		return "", "", "", fmt.Errorf("no host in %q", spec)
	}
	return userName, host, port, nil
}

// authMethods offers the SSH agent's keys, then the identity files that
// can be read without a passphrase.
func authMethods(identities []string, agentSocket string) []ssh.AuthMethod {
	var signers []ssh.Signer
	for _, f := range identities {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s, err := ssh.ParsePrivateKey(b); err == nil {
			signers = append(signers, s)
		}
	}
	var methods []ssh.AuthMethod
	if agentSocket != "" {
		methods = append(methods, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			c, err := net.Dial("unix", agentSocket)
			if err != nil {
				return signers, nil // no agent: the files alone
			}
			// The connection stays open: the agent signs through it
			// during the handshake that asked for these signers.
			agentSigners, err := sshagent.NewClient(c).Signers()
			if err != nil {
				c.Close()
				return signers, nil
			}
			return append(agentSigners, signers...), nil
		}))
	} else if len(signers) > 0 {
		methods = append(methods, ssh.PublicKeys(signers...))
	}
	return methods
}

// hostKeyCallback checks a server's key against known_hosts; an unknown
// key is added with AcceptNew, a changed one always refused.
func (d *Dialer) hostKeyCallback() (ssh.HostKeyCallback, error) {
	var files []string
	for _, f := range d.opts.KnownHosts {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	var check ssh.HostKeyCallback
	if len(files) > 0 {
		var err error
		if check, err = knownhosts.New(files...); err != nil {
			return nil, fmt.Errorf("read known_hosts: %w", err)
		}
	}
	return func(hostname string, addr net.Addr, key ssh.PublicKey) error {
		err := &knownhosts.KeyError{}
		if check != nil {
			e := check(hostname, addr, key)
			if !errors.As(e, &err) {
				return e // nil, or a revoked key
			}
		}
		if len(err.Want) == 0 && d.opts.AcceptNew && len(d.opts.KnownHosts) > 0 {
			return appendKnownHost(d.opts.KnownHosts[0], hostname, key)
		}
		return &HostKeyError{Host: d.name, Fingerprint: ssh.FingerprintSHA256(key)}
	}, nil
}

func appendKnownHost(file, hostname string, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("accept new host key: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("accept new host key: %w", err)
	}
	_, err = fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("accept new host key: %w", err)
	}
	return nil
}

// knownAlgorithms lists the key algorithms known_hosts holds for addr, so
// that the server is asked for a key that can be checked (a server offers
// several, and a Go client would pick its own preference).
func knownAlgorithms(check ssh.HostKeyCallback, addr string) []string {
	var ke *knownhosts.KeyError
	probe := check(addr, &net.TCPAddr{}, probeKey{})
	if !errors.As(probe, &ke) {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	return algos
}

// probeKey is a key no known_hosts line matches.
type probeKey struct{}

func (probeKey) Type() string                                 { return "conch-probe" }
func (probeKey) Marshal() []byte                              { return []byte("conch-probe") }
func (probeKey) Verify(data []byte, sig *ssh.Signature) error { return errors.New("probe key") }

// Dial implements remote.Dialer: it connects when there is no live
// connection, deploys the agent when the host lacks it, and starts it.
func (d *Dialer) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("dialer closed")
	}
	if d.client == nil || isClosed(d.dead) {
		d.dropLocked()
		if err := d.connectLocked(ctx); err != nil {
			return nil, err
		}
	}
	if d.agentCmd == "" {
		if err := d.deployLocked(ctx); err != nil {
			return nil, err
		}
	}
	return d.startAgent(ctx)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// connectLocked logs in through every hop to the host and starts the
// keep-alive.
func (d *Dialer) connectLocked(ctx context.Context) error {
	check, err := d.hostKeyCallback()
	if err != nil {
		return err
	}
	var (
		client  *ssh.Client
		closers []io.Closer
	)
	fail := func(err error) error {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
		return err
	}
	for _, hop := range d.hops {
		var conn net.Conn
		if client == nil {
			var nd net.Dialer
			conn, err = nd.DialContext(ctx, "tcp", hop.addr)
		} else {
			conn, err = client.DialContext(ctx, "tcp", hop.addr)
		}
		if err != nil {
			return fail(err)
		}
		cfg := &ssh.ClientConfig{User: hop.user, Auth: hop.auth, HostKeyCallback: check,
			HostKeyAlgorithms: knownAlgorithms(check, hop.addr)}
		// The handshake is bounded by ctx: a server that accepts and then
		// says nothing must not hang the call.
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		c, chans, reqs, err := ssh.NewClientConn(conn, hop.addr, cfg)
		if !stop() {
			if err == nil {
				c.Close()
			}
			return fail(context.Cause(ctx))
		}
		if err != nil {
			conn.Close()
			var hk *HostKeyError
			if errors.As(err, &hk) {
				return fail(hk)
			}
			return fail(err)
		}
		client = ssh.NewClient(c, chans, reqs)
		closers = append(closers, client)
	}
	d.client, d.closers, d.dead = client, closers, make(chan struct{})
	dead := d.dead
	d.bg.Go(func() {
		client.Wait()
		close(dead)
	})
	d.bg.Go(func() { keepAlive(client, d.opts.KeepAlive, dead) })
	return nil
}

// keepAlive sends a keep-alive request every interval and closes the
// connection when one goes unanswered for an interval: a connection that
// died without a word (a cable pulled, a VM paused) ends its commands.
func keepAlive(c *ssh.Client, interval time.Duration, dead <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-dead:
			return
		case <-t.C:
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		timer := time.NewTimer(interval)
		select {
		case err := <-answered:
			timer.Stop()
			if err != nil {
				c.Close()
				return
			}
		case <-timer.C:
			c.Close()
			<-answered
			return
		case <-dead:
			timer.Stop()
			<-answered
			return
		}
	}
}

// dropLocked closes the connection and its hops and waits for their
// watchers.
func (d *Dialer) dropLocked() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i].Close()
	}
	d.bg.Wait()
	d.client, d.closers, d.dead = nil, nil, nil
}

// Close implements io.Closer: it closes the connection (every agent on it
// then ends its input and kills what it started).
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.dropLocked()
	return nil
}

// session opens a session, waiting for a free slot of MaxSessions.
func (d *Dialer) session(ctx context.Context) (*ssh.Session, func(), error) {
	select {
	case d.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, context.Cause(ctx)
	}
	release := func() { <-d.sessions }
	s, err := d.client.NewSession()
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("open session: %w", err)
	}
	return s, release, nil
}

// output runs script on the host with stdin and returns its stdout.
func (d *Dialer) output(ctx context.Context, script string, stdin io.Reader) (string, error) {
	s, release, err := d.session(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdin, s.Stdout, s.Stderr = stdin, &out, &errb
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if err := s.Run(script); err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	return out.String(), nil
}

// deployLocked makes sure the host has this conch (remote.Deploy) and
// remembers the command that starts it.
func (d *Dialer) deployLocked(ctx context.Context) error {
	dep, err := remote.Deploy(ctx, d.name, d.output, d.opts.AgentBinary, d.binHash)
	if err != nil {
		return err
	}
	d.agentCmd = agentCommand(dep.Path, d.opts.AgentArgs)
	return nil
}

func agentCommand(path string, args []string) string {
	cmd := "exec " + remote.ShellQuote(path) + " agent"
	for _, a := range args {
		cmd += " " + remote.ShellQuote(a)
	}
	return cmd
}

// startAgent starts the agent in a session of its own.
func (d *Dialer) startAgent(ctx context.Context) (io.ReadWriteCloser, error) {
	s, release, err := d.session(ctx)
	if err != nil {
		return nil, err
	}
	st := &stream{s: s, release: release, exited: make(chan struct{})}
	st.in, err = s.StdinPipe()
	if err == nil {
		st.out, err = s.StdoutPipe()
	}
	if err == nil {
		s.Stderr = io.MultiWriter(d.opts.Stderr, &st.stderr)
		err = s.Start(d.agentCmd)
	}
	if err != nil {
		s.Close()
		release()
		return nil, fmt.Errorf("start agent: %w", err)
	}
	go func() {
		st.exitErr = s.Wait()
		close(st.exited)
	}()
	return st, nil
}

// exitWait bounds the wait for an agent's exit status once its output
// ended: sshd sends it right after the agent exits.
const exitWait = 2 * time.Second

// stream is an agent's session: its stdout to read, its stdin to write.
type stream struct {
	s       *ssh.Session
	in      io.WriteCloser
	out     io.Reader
	stderr  remote.StderrTail
	exited  chan struct{} // closed once the session's Wait returned exitErr
	exitErr error
	once    sync.Once
	release func()
}

// Read implements io.Reader. When the agent's output ends because it
// exited with an error (it could not start: a mode this host cannot
// enforce, a cwd it lacks), the error says so in the agent's last words.
func (st *stream) Read(b []byte) (int, error) {
	n, err := st.out.Read(b)
	if err != io.EOF {
		return n, err
	}
	select {
	case <-st.exited:
	case <-time.After(exitWait):
		return n, err
	}
	var ee *ssh.ExitError
	if errors.As(st.exitErr, &ee) {
		if last := st.stderr.Last(); last != "" {
			return n, fmt.Errorf("agent exited with status %d: %s", ee.ExitStatus(), last)
		}
	}
	return n, err
}

func (st *stream) Write(b []byte) (int, error) { return st.in.Write(b) }

// Close ends the session; sshd then closes the agent's input. (No
// CloseWrite first: x/crypto's channel does not guard it against a Write
// in flight, and the session's close ends the input all the same.)
func (st *stream) Close() error {
	st.once.Do(func() {
		st.s.Close()
		<-st.exited
		st.release()
	})
	return nil
}
