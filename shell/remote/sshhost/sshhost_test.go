//go:build linux

package sshhost_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/sshhost"
	"github.com/conch-dev/conch/tools"
)

// Two hosts, each its own sshd: exit codes, streams, the host's own
// environment, timeouts killing the whole tree, kills of tasks.
func TestTwoHosts(t *testing.T) {
	t.Parallel()
	s1, s2 := startDeployed(t), startDeployed(t)
	c := newClient(t)
	c.alias(t, "one", s1, 0)
	c.alias(t, "two", s2, 0)
	e1 := newExec(t, sshhost.Host{Name: "h1", SSH: "one"}, c.options(), s1)
	e2 := newExec(t, sshhost.Host{Name: "h2", SSH: "two", Cwd: "/tmp"}, c.options(), s2)

	r := run(t, e1, shell.Request{Command: "id -un; pwd; echo oops >&2; exit 7"})
	if code(r) != 7 || r.Stdout.Text != testUser+"\n/home/"+testUser+"\n" || r.Stderr.Text != "oops\n" {
		t.Errorf("h1: %+v", r)
	}
	if r := run(t, e2, shell.Request{Command: "pwd; echo $XDG_CACHE_HOME"}); r.Stdout.Text != "/tmp\n"+s2.Cache+"\n" {
		t.Errorf("h2 runs on its own host in its cwd: %q", r.Stdout.Text)
	}

	r = run(t, e1, shell.Request{Command: "sleep 30 & setsid sleep 30 & sleep 30", Timeout: 300 * time.Millisecond})
	if !r.TimedOut || r.Signal != "SIGTERM" {
		t.Errorf("timeout: %+v", r)
	}
	spec, _ := e2.Resolve(shell.Request{Command: "trap '' TERM; echo started; sleep 30"})
	p, err := e2.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "started")
	if !p.Kill() {
		t.Error("Kill of a running task returned false")
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("killed task still running after 10 s")
	}
	if p.Status() != shell.StatusKilled || p.Signal() != "SIGKILL" {
		t.Errorf("killed task: %s %s", p.Status(), p.Signal())
	}
	// The sleeps of the timed-out command were on h1: the escapee
	// (setsid) too is gone once the agent's executor closed; this is
	// checked at cleanup, and here for what the timeout killed.
	if left := testutil.Commands(e1.marker); len(left) > 1 {
		t.Errorf("%d processes left on h1 after the timeout, want at most the setsid escapee", len(left))
	}
}

func waitOutput(t *testing.T, p shell.Process, want string) {
	t.Helper()
	var got strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(got.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q after 10 s, want %q", got.String(), want)
		}
		r := p.Read()
		got.WriteString(tools.JoinStreams(r.Stdout, r.Stderr))
		time.Sleep(20 * time.Millisecond)
	}
}

// A connection cut mid-command (the TCP connection dies): the call ends
// with the lost marker, sshd ends the agent's input, the agent kills the
// command on the host; the next call connects again.
func TestDroppedConnectionStopsTheCommand(t *testing.T) {
	t.Parallel()
	s := startDeployed(t)
	px := newProxy(t, s.Addr())
	c := newClient(t)
	c.alias(t, "h", s, px.port())
	ex := newExec(t, sshhost.Host{Name: "gpu1", SSH: "h"}, c.options(), s)
	spec, _ := ex.Resolve(shell.Request{Command: "echo started; sleep 60"})
	p, err := ex.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "started")
	px.cut()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("command still running here 20 s after its connection was cut")
	}
	want := "[connection to host gpu1 lost; the command was stopped]\n"
	if r := p.Result(); r.Stderr.Text != want || p.Status() != shell.StatusKilled {
		t.Errorf("cut call: %s %+v, want stderr %q", p.Status(), r, want)
	}
	testutil.AssertNoProcesses(t, ex.marker)
	waitNoAgents(t, s)
	if r := run(t, ex, shell.Request{Command: "echo again"}); r.Stdout.Text != "again\n" {
		t.Errorf("after reconnecting: %+v", r)
	}
}

// A connection that dies without a word (no FIN, no RST) is noticed by
// the keep-alive: the call ends as lost.
func TestKeepAliveNoticesASilentDeath(t *testing.T) {
	t.Parallel()
	// The keep-alive closes a connection whose answer takes longer than
	// its interval, so the interval must be one that the machine meets
	// while the connection lives, under load too: 300 ms went unanswered
	// behind the agent's upload on CI, and behind just the probe and the
	// agent's start here (load 8, -race). That is not the silence this
	// test is about. The host has the agent already, and 2 s is noticed
	// within 4 s.
	s := startDeployed(t)
	px := newProxy(t, s.Addr())
	c := newClient(t)
	c.alias(t, "h", s, px.port())
	o := c.options()
	o.KeepAlive = 2 * time.Second
	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, o, s)
	spec, _ := ex.Resolve(shell.Request{Command: "echo started; sleep 60"})
	p, err := ex.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "started")
	px.frozen.Store(true)
	t0 := time.Now()
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("call still running 20 s after its connection went silent")
	}
	if r := p.Result(); !strings.HasPrefix(r.Stderr.Text, "[connection to host h lost") {
		t.Errorf("silent death: %+v", r)
	}
	t.Logf("noticed after %v", time.Since(t0))
	px.cut() // sshd now sees the end too, and the agent stops the command
}

// ProxyJump: the host is reached through another sshd.
func TestProxyJump(t *testing.T) {
	t.Parallel()
	jump := startSSHD(t, "AllowTcpForwarding local")
	target := startDeployed(t)
	c := newClient(t)
	c.alias(t, "jump", jump, 0)
	appendFile(t, c.SSHConfig, fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  ProxyJump jump\n",
		target.Port, testUser, target.ClientKey))
	appendFile(t, c.KnownHosts, target.KnownHostsLine(target.Port)+"\n")
	ex := newExec(t, sshhost.Host{Name: "t", SSH: "target"}, c.options(), target)
	if r := run(t, ex, shell.Request{Command: "echo $XDG_CACHE_HOME"}); r.Stdout.Text != target.Cache+"\n" {
		t.Errorf("through the jump host: %+v", r)
	}
	if !strings.Contains(jump.Log.String(), "Accepted publickey for "+testUser) {
		t.Errorf("the jump host saw no login:\n%s", jump.Log.String())
	}
}

func TestHostKeyMismatchAndUnknown(t *testing.T) {
	t.Parallel()
	s, other := startDeployed(t), startSSHD(t)
	c := newClient(t)
	// known_hosts holds the other server's key for this server's address.
	appendFile(t, c.SSHConfig, fmt.Sprintf("Host h\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n", s.Port, testUser, s.ClientKey))
	appendFile(t, c.KnownHosts, strings.Replace(other.KnownHostsLine(other.Port), fmt.Sprint(other.Port), fmt.Sprint(s.Port), 1)+"\n")
	want := fmt.Sprintf("host web: host key not trusted (%s); add it with ssh-keyscan or connect once with ssh", fingerprint(s))
	for _, kh := range []string{c.KnownHosts, filepath.Join(c.Dir, "missing")} {
		o := c.options()
		o.KnownHosts = []string{kh}
		ex := newExec(t, sshhost.Host{Name: "web", SSH: "h"}, o, s)
		_, err := ex.Start(shell.Spec{Command: "true"})
		var hk *sshhost.HostKeyError
		var ue *remote.UnreachableError
		if !errors.As(err, &hk) || !errors.As(err, &ue) || hk.Error() != want {
			t.Errorf("known_hosts %s: %v, want %q", filepath.Base(kh), err, want)
		}
	}
	// accept-new: an unknown key is recorded and trusted from then on.
	o := c.options()
	o.KnownHosts = []string{filepath.Join(c.Dir, "new_known_hosts")}
	o.AcceptNew = true
	ex := newExec(t, sshhost.Host{Name: "web", SSH: "h"}, o, s)
	if r := run(t, ex, shell.Request{Command: "echo ok"}); r.Stdout.Text != "ok\n" {
		t.Errorf("accept-new: %+v", r)
	}
	if b, _ := os.ReadFile(o.KnownHosts[0]); !strings.Contains(string(b), strings.TrimSpace(strings.SplitN(s.KnownHostsLine(s.Port), " ", 2)[1])) {
		t.Errorf("accept-new did not record the key: %q", b)
	}
}

func fingerprint(s *sshd) string {
	return sshFingerprint(s.HostKey.PublicKey())
}

func TestUnreachableHost(t *testing.T) {
	t.Parallel()
	sshdtest.EnsureUser(t)
	c := newClient(t)
	o := c.options()
	o.Executor.DialTimeout = 5 * time.Second
	ex := newExec(t, sshhost.Host{Name: "db", SSH: testUser + "@127.0.0.1:1"}, o)
	_, err := ex.Start(shell.Spec{Command: "true"})
	want := "host db unreachable: dial tcp 127.0.0.1:1: connect: connection refused; the command did not run"
	if err == nil || err.Error() != want {
		t.Errorf("Start: %v, want %q", err, want)
	}
}

// The agent is uploaded when the host lacks it, checked, and reused by
// the next connection.
func TestDeployWhenMissing(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	if r := run(t, ex, shell.Request{Command: "echo first"}); r.Stdout.Text != "first\n" {
		t.Fatalf("first call: %+v", r)
	}
	deployed, _ := filepath.Glob(filepath.Join(s.Cache, "conch", "conch-*"))
	if len(deployed) != 1 || deployed[0] != agentPath(t, s.Cache, c.bin) {
		t.Fatalf("deployed agents: %q, want %s", deployed, agentPath(t, s.Cache, c.bin))
	}
	want, _ := os.ReadFile(c.bin)
	if got, _ := os.ReadFile(deployed[0]); string(got) != string(want) {
		t.Fatalf("deployed agent differs from the binary")
	}
	before, _ := os.Stat(deployed[0])
	ex.Close()

	// Present and intact: no upload (an upload renames a new file over
	// the path).
	ex = newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	if r := run(t, ex, shell.Request{Command: "echo second"}); r.Stdout.Text != "second\n" {
		t.Fatalf("second connection: %+v", r)
	}
	if after, err := os.Stat(deployed[0]); err != nil || !os.SameFile(before, after) {
		t.Errorf("an intact agent was uploaded again (%v)", err)
	}
	assertNoUploadsLeft(t, s)
}

// A host whose agent has the right name but other content (a cut upload,
// an old build) gets it uploaded again.
func TestDeployReplacesOutdated(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	path := agentPath(t, s.Cache, c.bin)
	putAgent(t, path, []byte("#!/bin/sh\necho old\n"))
	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	if r := run(t, ex, shell.Request{Command: "echo second"}); r.Stdout.Text != "second\n" {
		t.Fatalf("after replacing an outdated agent: %+v", r)
	}
	want, _ := os.ReadFile(c.bin)
	if got, _ := os.ReadFile(path); string(got) != string(want) {
		t.Errorf("outdated agent not replaced")
	}
	assertNoUploadsLeft(t, s)
}

// assertNoUploadsLeft fails t if an upload left its temporary file on s.
func assertNoUploadsLeft(t *testing.T, s *sshd) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(s.Cache, "conch", ".upload-*"))
	if len(left) != 0 {
		t.Errorf("temporary uploads left: %q", left)
	}
}

// Uploading a new build removes the older builds of the cache, but not
// one that a process of the remote user still runs (another conch's agent
// there), nor another file of the directory.
func TestUploadRemovesOldBuilds(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	u := sshdtest.EnsureUser(t)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := filepath.Join(s.Cache, "conch")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	old, running, other := filepath.Join(dir, "conch-0000000000000000"), filepath.Join(dir, "conch-1111111111111111"), filepath.Join(dir, "notes")
	for _, f := range []string{old, running, other} {
		if err := os.WriteFile(f, sleep, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{dir, old, running, other} {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// Another conch's agent, running from its build as the remote user.
	marker := testutil.Marker(t)
	agent := exec.Command(running, "60")
	agent.Env = testutil.Env(marker)
	agent.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		agent.Process.Kill()
		agent.Wait()
	}()

	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	if r := run(t, ex, shell.Request{Command: "echo first"}); r.Stdout.Text != "first\n" {
		t.Fatalf("first call: %+v", r)
	}
	bin, _ := os.ReadFile(c.bin)
	sum := sha256.Sum256(bin)
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	var names []string
	for _, f := range left {
		names = append(names, filepath.Base(f))
	}
	// Glob sorts by name, and the new build's name is its checksum's.
	want := []string{filepath.Base(running), "conch-" + hex.EncodeToString(sum[:])[:16], "notes"}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("cache after the upload: %q, want %q", names, want)
	}
}

// An agent that cannot start (here: a cwd the host lacks) makes the host
// unreachable with the agent's own words, not a bare end of stream.
func TestAgentStartFailureIsNamed(t *testing.T) {
	t.Parallel()
	s := startDeployed(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	o := c.options()
	o.AgentArgs = append(o.AgentArgs, "--cwd", "/nonexistent")
	ex := newExec(t, sshhost.Host{Name: "gpu1", SSH: "h"}, o, s)
	spec, err := ex.Resolve(shell.Request{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Launch(spec)
	var ue *remote.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "conch agent: --cwd /nonexistent: not a directory; the command did not run") {
		t.Errorf("Launch: %v, want the host unreachable with the agent's error", err)
	}
}

// A host of another architecture (its uname says so) is refused with the
// path to install conch at.
func TestOtherPlatformRefused(t *testing.T) {
	t.Parallel()
	fake, err := os.MkdirTemp("", "conch-fake-uname-") // readable by the test user, unlike t.TempDir
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(fake, 0o755)
	t.Cleanup(func() { os.RemoveAll(fake) })
	os.WriteFile(filepath.Join(fake, "uname"), []byte("#!/bin/sh\necho Linux riscv64\n"), 0o755)
	// sshd sets PATH itself, and bash started by sshd skips BASH_ENV: a
	// forced command puts the fake first, then runs what was asked.
	s := startSSHD(t, `ForceCommand PATH=`+fake+`:$PATH; eval "$SSH_ORIGINAL_COMMAND"`)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	ex := newExec(t, sshhost.Host{Name: "rv", SSH: "h"}, c.options(), s)
	_, err = ex.Start(shell.Spec{Command: "true"})
	var pe *sshhost.PlatformError
	if !errors.As(err, &pe) {
		t.Fatalf("Start: %v, want a PlatformError", err)
	}
	want := fmt.Sprintf("host rv: no conch for linux/riscv64 there; install it at %s/conch/%s", s.Cache, filepath.Base(pe.Path))
	if pe.Error() != want {
		t.Errorf("%q\nwant %q", pe.Error(), want)
	}
}

// 20 calls at once on one host share the one agent session.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := startDeployed(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := run(t, ex, shell.Request{Command: fmt.Sprintf("sleep 0.2; echo %d", i)})
			if r.Stdout.Text != fmt.Sprintf("%d\n", i) || code(r) != 0 {
				t.Errorf("call %d: %+v", i, r)
			}
		})
	}
	wg.Wait()
}

// A cancelled call kills the command's group on the host.
func TestContextCancelKillsRemoteCommand(t *testing.T) {
	t.Parallel()
	s := startDeployed(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
	run(t, ex, shell.Request{Command: "true"}) // connected: the ctx below is for the command
	spec, _ := ex.Resolve(shell.Request{Command: "sleep 30 & sleep 30"})
	// Cancelled once the command runs on the host (both sleeps carry the
	// test's marker), not after a time in which a loaded machine may not
	// even have spawned it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for len(testutil.Commands(ex.marker)) < 2 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	r, err := shell.Run(ctx, ex, spec)
	cancel()
	<-watched
	if err != nil || !r.Aborted || r.Signal != "SIGTERM" {
		t.Errorf("cancelled run: %+v %v", r, err)
	}
	// Both sleeps, the background one too, before the executor's close
	// (which would end them anyway).
	testutil.AssertNoProcesses(t, ex.marker)
}

// A ctx that ends at any point of the first connection (handshake, probe,
// upload, agent start) aborts the call before the spawn and leaves no
// agent behind (a race with the stream's close was found this way).
func TestCancelDuringFirstDial(t *testing.T) {
	t.Parallel()
	s := startSSHD(t)
	c := newClient(t)
	c.alias(t, "h", s, 0)
	for _, d := range []time.Duration{20, 50, 100, 200, 400, 800} {
		ex := newExec(t, sshhost.Host{Name: "h", SSH: "h"}, c.options(), s)
		ctx, cancel := context.WithTimeout(context.Background(), d*time.Millisecond)
		r, err := shell.Run(ctx, ex, shell.Spec{Command: "true"})
		cancel()
		if err != nil && !errors.Is(err, shell.ErrAbortedBeforeSpawn) {
			t.Errorf("after %v: %v, want aborted before spawn", d*time.Millisecond, err)
		}
		if err == nil && code(r) != 0 && !r.Aborted {
			t.Errorf("after %v: %+v", d*time.Millisecond, r)
		}
		ex.Close()
		s.AssertNoAgents(t)
	}
}
