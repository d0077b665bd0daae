//go:build linux

package nsinit_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// sandboxHost is a user's world for the sandbox tests: a home with a
// .bashrc, conch's configuration and a secret, and a workspace in it
// holding a repository with a commit and a symlink pointing out. It lives
// in /var/tmp, so that /tmp can be a writable root without making the
// whole fixture writable.
type sandboxHost struct {
	home, ws, conf, secret string
	state                  string // conch's state directory (the cache layer's)
	env                    []string
}

func newSandboxHost(t *testing.T, marker string) *sandboxHost {
	t.Helper()
	return newSandboxHostIn(t, marker, "/var/tmp")
}

// newSandboxHostIn is newSandboxHost with its home under parent.
func newSandboxHostIn(t *testing.T, marker, parent string) *sandboxHost {
	t.Helper()
	base, err := os.MkdirTemp(parent, "conch-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	h := &sandboxHost{
		home:   filepath.Join(base, "home"),
		ws:     filepath.Join(base, "home", "ws"),
		conf:   filepath.Join(base, "home", ".config", "conch"),
		secret: filepath.Join(base, "home", "secret"),
		state:  filepath.Join(base, "home", ".local", "state", "conch"),
	}
	for _, d := range []string{h.ws, h.conf, h.secret, h.state, filepath.Join(h.home, ".cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(h.home, ".bashrc"), "# bashrc\n")
	write(filepath.Join(h.conf, "config.toml"), "# conch\n")
	write(filepath.Join(h.secret, "key"), "s3cret\n")
	if err := os.Symlink(h.home, filepath.Join(h.ws, "out")); err != nil {
		t.Fatal(err)
	}
	h.env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + h.home, "LANG=C",
		testutil.MarkerEnv + "=" + marker,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
	}
	git := exec.Command("bash", "-c", "git init -q && git commit -q --allow-empty -m first")
	git.Dir, git.Env = h.ws, h.env
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return h
}

func (h *sandboxHost) policy(network sandbox.Network) sandbox.Policy {
	return sandbox.Policy{
		Network:    network,
		Workspace:  h.ws,
		TempDirs:   []string{"/tmp"},
		Caches:     []string{filepath.Join(h.home, ".cache")},
		CacheLayer: filepath.Join(h.state, "cache-layer"),
		Hidden:     []string{h.state},
		DenyRead:   []string{h.secret},
		Protected:  []string{h.conf},
	}
}

// startSandboxed starts an init enforcing p (resolved), or none when p is
// nil.
func startSandboxed(t *testing.T, p *sandbox.Policy) (*nsinit.Init, *sandbox.Plan) {
	t.Helper()
	opts := initOptions()
	if p != nil {
		plan, err := p.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		opts.Sandbox = plan
	}
	in, err := nsinit.Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { in.Close() })
	if u := in.Unenforced(); len(u) > 0 {
		t.Errorf("this host should enforce everything; unenforced: %q", u)
	}
	return in, opts.Sandbox
}

// runIn runs `bash -c script` in h's workspace with h's environment.
func (h *sandboxHost) runIn(t *testing.T, in *nsinit.Init, script string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr, _, _ = h.runRecorded(t, in, script)
	return code, stdout, stderr
}

// runMarked is runIn, with the markers the record of what the sandbox of
// plan denied the command gives.
func (h *sandboxHost) runMarked(t *testing.T, in *nsinit.Init, plan *sandbox.Plan, script string) (code int, stdout, stderr string, markers []string) {
	t.Helper()
	code, stdout, stderr, denied, more := h.runRecorded(t, in, script)
	return code, stdout, stderr, sandbox.Markers(plan, denied, more)
}

// runRecorded is runIn, with the command's denial record.
func (h *sandboxHost) runRecorded(t *testing.T, in *nsinit.Init, script string) (code int, stdout, stderr string, denied []sandbox.Denial, more int) {
	t.Helper()
	return h.runRecordedLong(t, in, script, 2*time.Minute)
}

// runLong is runIn for a script that may take up to d (a build).
func (h *sandboxHost) runLong(t *testing.T, in *nsinit.Init, script string, d time.Duration) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr, _, _ = h.runRecordedLong(t, in, script, d)
	return code, stdout, stderr
}

// runRecordedLong is runRecorded for a script that may take up to d.
func (h *sandboxHost) runRecordedLong(t *testing.T, in *nsinit.Init, script string, d time.Duration) (code int, stdout, stderr string, denied []sandbox.Denial, more int) {
	t.Helper()
	so, ow := capture(t)
	se, ew := capture(t)
	ch, err := in.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", script}, Env: h.env, Dir: h.ws, Stdout: ow, Stderr: ew})
	ow.Close()
	ew.Close()
	if err != nil {
		t.Fatalf("Spawn %q: %v", script, err)
	}
	ws := waitFor(t, ch, d)
	stdout, stderr = so.text(t), se.text(t)
	denied, more = ch.Denials()
	ch.Release()
	return ws.ExitStatus(), stdout, stderr, denied, more
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSandboxAttacks: in workspace-write mode, each write that would let
// a command persist or escape fails, the host's file is intact, and
// attribution names the path with the marker the model will see.
func TestSandboxAttacks(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	hook := filepath.Join(h.ws, ".git", "hooks", "pre-commit")
	writable := strings.Join(plan.Writable, ", ")
	attacks := []struct {
		name, script string
		intact       string // a host file that must not change
		marker       string // the marker attribution must give
	}{
		{"write ~/.bashrc", `echo evil >> ~/.bashrc`, filepath.Join(h.home, ".bashrc"),
			"[sandbox: write to " + h.home + "/.bashrc denied under workspace-write mode; writable: " + writable + "]"},
		{"write a protected hook", `echo evil > .git/hooks/pre-commit`, "",
			"[sandbox: " + hook + " is read-only (protected)]"},
		{"rewrite the repository's config", `git config core.hooksPath /tmp/evil`, filepath.Join(h.ws, ".git", "config"),
			"[sandbox: " + h.ws + "/.git/config is read-only (protected)]"},
		{"replace .git by a copy with writable hooks", `mv .git .git2 && cp -a .git2 .git && echo evil > .git/hooks/pre-commit`, "",
			"[sandbox: " + h.ws + "/.git is read-only (protected)]"},
		{"escape through a symlink", `echo evil > out/escaped`, "",
			"[sandbox: write to " + h.home + "/escaped denied under workspace-write mode; writable: " + writable + "]"},
		{"rewrite conch's configuration", `echo evil >> ~/.config/conch/config.toml`, filepath.Join(h.conf, "config.toml"),
			"[sandbox: write to " + h.conf + "/config.toml denied under workspace-write mode; writable: " + writable + "]"},
		{"python3 writing outside", `python3 -c 'open("` + h.home + `/py", "w")'`, "",
			"[sandbox: write to " + h.home + "/py denied under workspace-write mode; writable: " + writable + "]"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			var before string
			if a.intact != "" {
				before = readFile(t, a.intact)
			}
			code, _, stderr, markers := h.runMarked(t, in, plan, a.script)
			if code == 0 {
				t.Fatalf("%q succeeded in the sandbox", a.script)
			}
			if a.intact != "" && readFile(t, a.intact) != before {
				t.Errorf("%s changed", a.intact)
			}
			if a.name == "python3 writing outside" && strings.Contains(stderr, "No such file") {
				t.Skipf("no python3 for this user: %s", stderr)
			}
			if len(markers) != 1 || markers[0] != a.marker {
				t.Errorf("stderr %q gave markers %q, want %q", stderr, markers, a.marker)
			}
		})
	}
	for _, f := range []string{hook, filepath.Join(h.home, "escaped")} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s was created", f)
		}
	}

	// /etc is not the user's to write, sandbox or not: as root the
	// sandbox denied it, as anyone else the system did, and attribution
	// says nothing.
	code, _, stderr, markers := h.runMarked(t, in, plan, `echo x > /etc/conch-sandbox-test`)
	if code == 0 {
		os.Remove("/etc/conch-sandbox-test")
		t.Fatal("a command wrote /etc")
	}
	want := []string{"[sandbox: write to /etc/conch-sandbox-test denied under workspace-write mode; writable: " + writable + "]"}
	if os.Geteuid() != 0 {
		want = nil
	}
	if !slices.Equal(markers, want) {
		t.Errorf("uid %d, echo > /etc/x: stderr %q gave markers %q, want %q", os.Geteuid(), stderr, markers, want)
	}

	// No capabilities, even as root; no_new_privs; a seccomp filter.
	_, stdout, _ := h.runIn(t, in, `grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '`)
	for _, line := range []string{"CapEff: 0000000000000000", "CapBnd: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("a command's status lacks %q:\n%s", line, stdout)
		}
	}

	// A denyRead directory is shown as empty, and cannot be filled.
	code, stdout, _ = h.runIn(t, in, `ls -A ~/secret; cat ~/secret/key; echo x > ~/secret/new`)
	if code == 0 || strings.Contains(stdout, "key") || strings.Contains(stdout, "s3cret") {
		t.Errorf("denyRead: status %d, stdout %q", code, stdout)
	}
	if readFile(t, filepath.Join(h.secret, "key")) != "s3cret\n" {
		t.Error("the hidden secret changed on the host")
	}

	// Remounting the workspace's protected hook read-write, as root
	// inside, fails: no capability, and Landlock forbids mounts.
	if code, _, _ := h.runIn(t, in, `mount -o remount,rw .git/hooks`); code == 0 {
		t.Error("a command remounted a protected path read-write")
	}
}

// TestSandboxKeepsWorking: what a developer needs still works in
// workspace-write mode.
func TestSandboxKeepsWorking(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	tmp := "/tmp/conch-sandbox-" + marker
	t.Cleanup(func() { os.Remove(tmp) })
	works := []struct{ name, script string }{
		{"git commit in the workspace's repository", `echo a > a && git add a && git commit -q -m a && git log --oneline | wc -l`},
		{"git init and commit in a new repository", `mkdir fresh && cd fresh && git init -q && echo b > b && git add b && git commit -q -m b`},
		{"write /tmp", `echo x > ` + tmp + ` && cat ` + tmp},
		{"the Go build cache is writable", `d=$(go env GOCACHE) && mkdir -p "$d" && touch "$d/conch-probe" && rm "$d/conch-probe"`},
		{"npm --version", `npm --version`},
		{"write /dev/null", `echo x > /dev/null`},
	}
	for _, w := range works {
		t.Run(w.name, func(t *testing.T) {
			if code, stdout, stderr := h.runIn(t, in, w.script); code != 0 {
				t.Errorf("%q: status %d\nstdout %q\nstderr %q", w.script, code, stdout, stderr)
			}
		})
	}

	// A process-group kill of a sandboxed command.
	ch, err := in.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", "sleep 300 & sleep 300 & wait"}, Env: h.env, Dir: h.ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Terminate(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if ws := wait(t, ch); ws.Signal() != syscall.SIGTERM {
		t.Errorf("killed command: %v, want killed by SIGTERM", ws)
	}
	if alive, err := ch.Alive(); err != nil || alive {
		t.Errorf("after Terminate, Alive = %v, %v", alive, err)
	}
	ch.Release()
}

// acceptingSocket listens on a unix socket at path, accepting and
// closing every connection until the test ends, and returns path.
func acceptingSocket(t *testing.T, path string) string {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return path
}

// TestSandboxUnixSockets: connecting to a unix socket fails in the
// sandbox and works without it.
func TestSandboxUnixSockets(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	sock := acceptingSocket(t, filepath.Join(h.home, "sock"))
	os.Chmod(sock, 0o777)
	script := `perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!\n"' ` + sock
	bare, _ := startSandboxed(t, nil)
	if code, _, stderr := h.runIn(t, bare, script); code != 0 {
		t.Fatalf("without a sandbox the connect failed: %s", stderr)
	}
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	code, _, stderr := h.runIn(t, in, script)
	if code == 0 || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("in the sandbox: status %d, stderr %q; want Permission denied", code, stderr)
	}
}

// TestSandboxIOUring: io_uring, which opens and connects sockets without
// socket(2) where seccomp would see them, cannot be set up in the
// sandbox (EACCES); nor, since it creates files with a mode no filter
// sees, in an init without one (ENOSYS: see TestNoSetuidFiles); it can
// outside.
func TestSandboxIOUring(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 to call io_uring_setup")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Skip("io_uring is disabled on this host")
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	script := `python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(425, 8, ctypes.create_string_buffer(120)); print("fd" if r >= 0 else "errno %d" % ctypes.get_errno())'`
	outside := exec.Command("bash", "-c", script)
	outside.Env = h.env
	if out, _ := outside.Output(); string(out) != "fd\n" {
		t.Fatalf("outside io_uring_setup gave %q, want an fd", out)
	}
	bare, _ := startSandboxed(t, nil)
	if _, stdout, _ := h.runIn(t, bare, script); stdout != "errno 38\n" {
		t.Errorf("in an init without a sandbox io_uring_setup gave %q, want errno 38 (ENOSYS)", stdout)
	}
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	if _, stdout, _ := h.runIn(t, in, script); stdout != "errno 13\n" {
		t.Errorf("in the sandbox io_uring_setup gave %q, want errno 13 (EACCES)", stdout)
	}
}

// TestSandboxNetworkOff: with the network off, TCP, UDP and DNS fail;
// with it on, the same commands reach the test's listeners.
func TestSandboxNetworkOff(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcpScript := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d`, tcp.Addr().(*net.TCPAddr).Port)
	udpScript := fmt.Sprintf(`echo %s > /dev/udp/127.0.0.1/%d`, marker, udp.LocalAddr().(*net.UDPAddr).Port)
	received := func() bool {
		udp.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 256)
		n, _, err := udp.ReadFrom(buf)
		return err == nil && strings.Contains(string(buf[:n]), marker)
	}

	on := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &on)
	if code, _, stderr := h.runIn(t, in, tcpScript); code != 0 {
		t.Fatalf("network on: TCP failed: %s", stderr)
	}
	if code, _, stderr := h.runIn(t, in, udpScript); code != 0 || !received() {
		t.Fatalf("network on: UDP failed: %s", stderr)
	}

	off := h.policy(sandbox.NetworkOff)
	in, plan := startSandboxed(t, &off)
	checks := []struct{ name, script string }{
		{"TCP", tcpScript},
		{"UDP", udpScript},
		{"DNS", `getent hosts example.com`},
	}
	if ns := nameserver(); ns != "" {
		checks = append(checks, struct{ name, script string }{"DNS server", `echo x > /dev/udp/` + ns + `/53`})
	}
	for _, c := range checks {
		code, stdout, stderr, markers := h.runMarked(t, in, plan, c.script)
		if code == 0 {
			t.Errorf("network off: %s worked (%q)", c.name, stdout)
		}
		if len(markers) != 1 || markers[0] != "[sandbox: network is off for commands]" {
			t.Errorf("network off: %s: stderr %q gave markers %q", c.name, stderr, markers)
		}
		// A TCP connect is refused as Landlock refuses it, though the
		// supervisor, which Landlock does not bind, makes the call.
		if c.name == "TCP" && !strings.Contains(stderr, "Permission denied") {
			t.Errorf("network off: TCP: stderr %q, want Permission denied", stderr)
		}
	}
	if received() {
		t.Error("network off: the UDP datagram arrived")
	}
	// Nor may a command listen on TCP (any address of the namespace).
	if _, err := exec.LookPath("python3"); err == nil {
		bind := `python3 -c 'import socket; socket.socket().bind(("0.0.0.0", 0)); print("bound")'`
		if code, stdout, stderr := h.runIn(t, in, bind); code == 0 || stdout != "" || !strings.Contains(stderr, "Permission denied") {
			t.Errorf("network off: a TCP bind: status %d, stdout %q, stderr %q; want Permission denied", code, stdout, stderr)
		}
	}
}

// nameserver returns the first nameserver of /etc/resolv.conf, or "".
func nameserver() string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" && !strings.Contains(f[1], ":") {
			return f[1]
		}
	}
	return ""
}

// TestSandboxReadOnly: in read-only mode the workspace is not writable,
// the temp dirs and /dev/null are, and attribution says which mode.
func TestSandboxReadOnly(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	p.Mode = sandbox.ReadOnly
	in, plan := startSandboxed(t, &p)
	code, _, stderr, markers := h.runMarked(t, in, plan, `touch built`)
	if code == 0 {
		t.Fatal("read-only mode: a write in the workspace succeeded")
	}
	want := "[sandbox: write to " + h.ws + "/built denied under read-only mode; writable: /tmp]"
	if len(markers) != 1 || markers[0] != want {
		t.Errorf("stderr %q gave markers %q, want %q", stderr, markers, want)
	}
	tmp := "/tmp/conch-sandbox-ro-" + marker
	t.Cleanup(func() { os.Remove(tmp) })
	if code, _, stderr := h.runIn(t, in, `echo x > `+tmp+` && echo x > /dev/null && git status --short`); code != 0 {
		t.Errorf("read-only mode: /tmp, /dev/null or git status failed: %s", stderr)
	}
}

// TestSandboxUnenforced: listed unix sockets are enforced by their path
// (the supervisor connects them, TestSupervisorUnixSockets): nothing of
// the plan is left unenforced on this host.
func TestSandboxUnenforced(t *testing.T) {
	clean(t)
	plan, err := sandbox.Policy{Workspace: t.TempDir(), UnixSockets: []string{"/run/docker.sock"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := initOptions()
	o.Sandbox = plan
	in, err := nsinit.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if got := in.Unenforced(); len(got) != 0 {
		t.Errorf("Unenforced = %q, want nothing", got)
	}
}

// TestSandboxGoBuild: `go build` works in the workspace with the user's
// build cache under the cache layer. Root only: it uses this user's warm cache (a cold
// one would rebuild the standard library, for minutes on a loaded
// machine).
func TestSandboxGoBuild(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("uses root's warm Go build cache")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Dir(strings.TrimSpace(string(out)))
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	p.Caches = []string{cache}
	in, _ := startSandboxed(t, &p)
	h.env = append(h.env, "GOCACHE="+strings.TrimSpace(string(out)), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	script := `printf 'module hello\n\ngo 1.21\n' > go.mod && printf 'package main\n\nfunc main() { println("built") }\n' > main.go && go build -o hello . && ./hello`
	code, _, stderr := h.runIn(t, in, script)
	if code != 0 || !strings.Contains(stderr, "built") {
		t.Errorf("go build: status %d, stderr %q", code, stderr)
	}
}

// noLandlockHelper hides Landlock from itself and its children (a seccomp
// filter makes landlock_create_ruleset fail with ENOSYS, as on a kernel
// without it), starts a sandboxed init for the workspace in
// SANDBOX_TEST_WS, and prints what it reports and what two writes did.
func noLandlockHelper() int {
	hide := seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | seccomp.Action(syscall.ENOSYS),
				Names:  []string{"landlock_create_ruleset"},
			}},
		},
	}
	if err := seccomp.LoadFilter(hide); err != nil {
		fmt.Println("set-up:", err)
		return 1
	}
	ws := os.Getenv("SANDBOX_TEST_WS")
	plan, err := sandbox.Policy{Workspace: ws, TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		fmt.Println("resolve:", err)
		return 1
	}
	o := initOptions()
	o.Sandbox = plan
	in, err := nsinit.Start(o)
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	defer in.Close()
	fmt.Printf("unenforced: %q\n", in.Unenforced())
	for _, target := range []string{filepath.Join(filepath.Dir(ws), "outside"), filepath.Join(ws, ".git", "hooks", "pre-commit")} {
		ch, err := in.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", "echo x > " + target}, Dir: ws})
		if err != nil {
			fmt.Println("spawn:", err)
			return 1
		}
		ws, _ := ch.Wait()
		ch.Release()
		fmt.Printf("write %s: %d\n", filepath.Base(target), ws.ExitStatus())
	}
	return 0
}

// TestSandboxWithoutLandlock: on a kernel without Landlock, the
// supervisor still judges every write by its path, so the file sandbox
// holds and nothing is reported unenforced: a write outside the
// workspace and a protected hook are both refused.
func TestSandboxWithoutLandlock(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(testutil.Env(marker), helperEnv+"=nolandlock", "SANDBOX_TEST_WS="+h.ws, noRaceSleep)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, want := range []string{
		`unenforced: []`,
		"write outside: 1\n",
		"write pre-commit: 1\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helper output lacks %q:\n%s", want, out)
		}
	}
}
