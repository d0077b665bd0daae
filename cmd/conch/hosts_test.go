//go:build linux

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/local"
)

// TestHostsConfig: [hosts.<name>] tables configure remote hosts, conch
// config shows them, and bad ones are refused with file, line and key.
func TestHostsConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "timeout_ms = 300\n\n[hosts.gpu1]\nssh = \"me@gpu1.example:2222\"\ncwd = \"/srv/train\"\n\n[hosts.build]\nssh = \"buildbox\"\nnetwork = \"off\"\n"+
		"\n[hosts.dev]\npodman = \"devbox\"\n\n[hosts.ci]\ndocker = \"runner\"\n")
	stdout, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{
		`hosts.gpu1.ssh = "me@gpu1.example:2222"  # ` + p + ":4",
		`hosts.build.ssh = "buildbox"  # ` + p + ":8",
		`hosts.gpu1.cwd = "/srv/train"  # ` + p + ":5",
		`hosts.build.network = "off"  # ` + p + ":9",
		`hosts.dev.podman = "devbox"  # ` + p + ":12",
		`hosts.ci.docker = "runner"  # ` + p + ":15",
	} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, stdout)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"[hosts.gpu1]\nport = 22\n", ":2: hosts.gpu1.port: unknown key (a host takes ssh, podman, docker, image, engine, cwd, sandbox, network, containment, kubernetes, pod_template, context)"},
		{"[hosts.local]\nssh = \"x\"\n", `:2: hosts.local.ssh: "local" is this machine; name the host otherwise`},
		{"[hosts.gpu1]\nssh = [\"a\"]\n", ":2: hosts.gpu1.ssh: takes one value, not a list"},
		{"[hosts.gpu1]\nssh = \"a\"\nsandbox = \"none\"\n", ":3: hosts.gpu1.sandbox: mode must be one of: read-only, workspace-write, full-access"},
		{"[hosts.gpu1]\nssh = \"a\"\npodman = \"b\"\n", ":3: hosts.gpu1.podman: host gpu1 is given two transports (a host is one of ssh, podman, docker, image, kubernetes or pod_template)"},
	} {
		p := writeConfig(t, c.text)
		_, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
		if code != 2 || !strings.Contains(stderr, "config "+p+c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.text, code, stderr, c.want)
		}
	}
}

// TestHostsBuild: configured hosts give the bash tool its host parameter;
// a cwd for a host that is not configured is refused.
func TestHostsBuild(t *testing.T) {
	var c config
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	c.addFlags(fs, 0, slog.LevelInfo)
	if err := fs.Parse([]string{"--host", "gpu1=me@127.0.0.1:1", "--host-cwd", "gpu1=/srv"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.build(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var schema struct {
		Properties map[string]struct{ Enum []string } `json:"properties"`
	}
	json.Unmarshal(st.tools.Tools()[0].InputSchema, &schema)
	if got := schema.Properties["host"].Enum; strings.Join(got, ",") != "local,gpu1" {
		t.Errorf("host enum %q", got)
	}

	var bad config
	fs = flag.NewFlagSet("conch serve", flag.ContinueOnError)
	bad.addFlags(fs, 0, slog.LevelInfo)
	fs.Parse([]string{"--host-cwd", "gpu2=/srv"})
	if _, err := bad.build(nil); err == nil || err.Error() != "--host-cwd gpu2: no host gpu2 is configured" {
		t.Errorf("build with a cwd for no host: %v", err)
	}
}

// TestHostsAgentArgs: each host's agent gets this configuration's caps,
// its own cwd, and its own sandbox, network and containment, else this
// configuration's when given explicitly, else none (the agent's defaults).
func TestHostsAgentArgs(t *testing.T) {
	var c config
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	c.addFlags(fs, 0, slog.LevelInfo)
	if err := fs.Parse([]string{"--host", "a=x", "--host", "b=y", "--host-cwd", "a=/srv", "--timeout-ms", "5000",
		"--network", "off", "--host-sandbox", "b=full-access", "--host-containment", "b=require", "--pass-env", "FOO"}); err != nil {
		t.Fatal(err)
	}
	caps := fmt.Sprintf("--timeout-ms 5000 --max-timeout-ms %d --max-output-bytes %d --max-spill-bytes %d --grace-ms %d --pass-env FOO ",
		local.DefaultMaxTimeout.Milliseconds(), local.DefaultMaxOutputBytes, local.DefaultMaxSpillBytes, local.DefaultGrace.Milliseconds())
	for host, want := range map[string]string{
		"a": caps + "--cwd /srv --network off",
		"b": caps + "--containment require --sandbox full-access --network off",
	} {
		if got := strings.Join(c.agentArgs(host), " "); got != want {
			t.Errorf("agent args of %s:\n%s\nwant\n%s", host, got, want)
		}
	}
	fs = flag.NewFlagSet("conch serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.addFlags(fs, 0, slog.LevelInfo)
	if err := fs.Parse([]string{"--host-network", "a=maybe"}); err == nil || !strings.Contains(err.Error(), "network must be one of: on, public, allowlist, off") {
		t.Errorf("--host-network a=maybe: %v", err)
	}
}

// TestServeRemoteHost: conch serve with a host configured in its file,
// driven by an MCP client, runs commands on a real sshd's host (deploying
// itself there), runs tasks there, and leaves nothing on the host.
func TestServeRemoteHost(t *testing.T) {
	cs := serveWithHosts(t, sshdtest.Start(t), "[hosts.gpu1]\nssh = \"gpubox\"\ncwd = \"/tmp\"\n")
	on := func(command string) map[string]any {
		a := bash(command)
		a["host"] = "gpu1"
		return a
	}
	r := callTool(t, cs, "bash", on("id -un; pwd; exit 3"))
	if got := text(t, r); got != sshdtest.User+"\n/tmp\n[exit code: 3]" || r.IsError {
		t.Errorf("on gpu1: %q", got)
	}
	a := on("echo started; sleep 30")
	a["run_in_background"] = true
	started := text(t, callTool(t, cs, "bash", a))
	id := strings.TrimPrefix(started, "started background task ")
	if !strings.HasPrefix(id, "bash@gpu1-") {
		t.Fatalf("background on gpu1: %q", started)
	}
	if got := text(t, callTool(t, cs, "task_list", map[string]any{})); !strings.Contains(got, id+" [bash@gpu1] running") {
		t.Errorf("task_list: %q", got)
	}
	if got := text(t, callTool(t, cs, "task_kill", map[string]any{"task_id": id})); !strings.HasPrefix(got, "killed task "+id) {
		t.Errorf("task_kill: %q", got)
	}
	r = callTool(t, cs, "bash", map[string]any{"command": "true", "description": "d", "host": "gpu2"})
	if got := text(t, r); !r.IsError || got != `Error: unknown host "gpu2"; configured hosts: gpu1` {
		t.Errorf("unknown host: %q", got)
	}
}

// serveWithHosts starts conch serve with cfg, whose hosts reach srv
// through the alias gpubox, and connects an MCP client to it. At cleanup
// it checks that nothing is left here or on the host.
func serveWithHosts(t *testing.T, srv *sshdtest.Server, cfg string) *mcp.ClientSession {
	t.Helper()
	return serveWithHostsLog(t, srv, cfg, nil)
}

// serveWithHostsLog is serveWithHosts that also writes conch serve's log
// to logs, when not nil.
func serveWithHostsLog(t *testing.T, srv *sshdtest.Server, cfg string, logs io.Writer) *mcp.ClientSession {
	t.Helper()
	marker := testutil.Marker(t)
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	ssh := sshdtest.NewClient(filepath.Join(home, ".ssh"))
	ssh.Alias(t, "gpubox", srv, 0)
	cmd := exec.Command(testutil.ConchBinary(t), "serve", "--config", writeConfig(t, cfg), "--grace-ms", "500")
	cmd.Env = append(testutil.Env(marker), "HOME="+home, "SSH_AUTH_SOCK=", "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Stderr = newLogBuffer(t, "conch serve")
	if logs != nil {
		cmd.Stderr = io.MultiWriter(cmd.Stderr, logs)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyMCP)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		testutil.AssertNoProcesses(t, marker)
		srv.AssertNoAgents(t)
	})
	return cs
}

// TestServeRemoteHostContained: on a host, commands run with that host's
// containment and sandbox (docs/remote.md): by default in their own PID
// namespace, whose /proc shows the init and not the agent, and under
// workspace-write with the host's cwd as the workspace, so that a write
// to the remote user's home is denied with the sandbox's marker; a
// host's own sandbox = "full-access" lets it through.
func TestServeRemoteHostContained(t *testing.T) {
	srv := sshdtest.Start(t)
	u := sshdtest.EnsureUser(t)
	// The workspace is in the remote user's home, beside the ~/x the
	// sandbox denies (the temp and cache dirs are writable anyway).
	ws := filepath.Join(u.HomeDir, "ws-"+filepath.Base(srv.Dir))
	if out, err := exec.Command("su", "-s", "/bin/sh", u.Username, "-c", "mkdir "+ws).CombinedOutput(); err != nil {
		t.Fatalf("mkdir %s as %s: %v: %s", ws, u.Username, err, out)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	logs := new(testutil.Buffer)
	cs := serveWithHostsLog(t, srv, "[hosts.gpu1]\nssh = \"gpubox\"\ncwd = \""+ws+"\"\n\n"+
		"[hosts.open]\nssh = \"gpubox\"\ncwd = \""+ws+"\"\nsandbox = \"full-access\"\n", logs)
	on := func(host, command string) string {
		a := bash(command)
		a["host"] = host
		return text(t, callTool(t, cs, "bash", a))
	}
	// The init is conch itself, re-executed as `conch __init`; the agent
	// that started it is outside the namespace.
	got := on("gpu1", "tr '\\0' ' ' < /proc/1/cmdline; echo; "+
		"for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c 'conch-[0-9a-f]* agent'; touch x && echo wrote x")
	if l := strings.Split(got, "\n"); len(l) != 4 || !strings.Contains(l[0], "/conch-") || !strings.HasSuffix(l[0], " __init ") ||
		l[1] != "0" || l[2] != "wrote x" {
		t.Errorf("gpu1: %q, want /proc/1 to be the init (…/conch-<hash> __init), no agent, a write in the workspace", got)
	}
	home := u.HomeDir
	got = on("gpu1", "touch ~/x")
	want := "[stderr]\ntouch: cannot touch '" + home + "/x': Permission denied\n" +
		"[sandbox: write to " + home + "/x denied under workspace-write mode; writable: " + ws + ", /tmp, " + srv.Cache
	// The caches of the tools found there follow, under the cache layer
	// (docs/sandbox.md#the-cache-layer).
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "]\n[exit code: 1]") || strings.Count(got, "\n") != 3 {
		t.Errorf("touch ~/x on gpu1:\n%s\nwant:\n%s", got, want)
	}
	if got := on("open", "touch ~/x && rm ~/x && echo done"); got != "done\n" {
		t.Errorf("touch ~/x on open (full-access): %q", got)
	}
	// conch's log says what each host enforces once connected. It is
	// logged before the host's first command runs, but reaches logs
	// through a pipe that exec's copier reads beside the client's
	// stdout: on a loaded machine the result can come first (once in
	// CI), so the line is waited for.
	for host, sandbox := range map[string]string{"gpu1": "workspace-write, network on", "open": "none (off)"} {
		var line string
		testutil.WaitFor(t, 10*time.Second, "conch serve's line on connecting to "+host, func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `msg="connected to a remote host" host=`+host+" ") {
					line = l
				}
			}
			return line != ""
		})
		if !strings.Contains(line, " conch="+version+` enforces="process groups, `) ||
			!strings.Contains(line, "; containment: pid-namespace") || !strings.HasSuffix(line, "; sandbox: "+sandbox+`"`) {
			t.Errorf("conch serve's log on %s: %q, want what it enforces, sandbox %s", host, line, sandbox)
		}
	}
}

// TestServeRemoteHostTerminal: a tty call on a host runs on a terminal
// there: its prompt comes back as the screen of a background task, and
// task_input answers it.
func TestServeRemoteHostTerminal(t *testing.T) {
	cs := serveWithHosts(t, sshdtest.Start(t), "[hosts.gpu1]\nssh = \"gpubox\"\n")
	a := bash(`read -p "name? " x; echo "hi $x on $(hostname)"; sleep 30`)
	a["host"], a["tty"] = "gpu1", true
	r := callTool(t, cs, "bash", a)
	want := "name? \n[waiting for input; moved to background task bash@gpu1-1: send input with task_input, read it with task_output, stop it with task_kill]"
	if got := text(t, r); r.IsError || got != want {
		t.Fatalf("tty call on gpu1: %q, want %q", got, want)
	}
	r = callTool(t, cs, "task_input", map[string]any{"task_id": "bash@gpu1-1", "text": "bob", "keys": []string{"Enter"}})
	if got := text(t, r); r.IsError || !strings.Contains(got, "hi bob on ") {
		t.Errorf("task_input on gpu1: %q", got)
	}
	if got := text(t, callTool(t, cs, "task_kill", map[string]any{"task_id": "bash@gpu1-1"})); !strings.HasPrefix(got, "killed task bash@gpu1-1") {
		t.Errorf("task_kill: %q", got)
	}
}

// TestServeRemoteHostAgentFails: an agent that cannot start (a cwd its
// host lacks) makes the call fail with its words, which conch's log
// shows too, naming the host.
func TestServeRemoteHostAgentFails(t *testing.T) {
	logs := new(testutil.Buffer)
	cs := serveWithHostsLog(t, sshdtest.Start(t), "[hosts.gpu1]\nssh = \"gpubox\"\ncwd = \"/nonexistent\"\n", logs)
	a := bash("true")
	a["host"] = "gpu1"
	r := callTool(t, cs, "bash", a)
	want := "agent exited with status 1: conch agent: --cwd /nonexistent: not a directory; the command did not run"
	if got := text(t, r); !r.IsError || !strings.HasPrefix(got, "Error: host gpu1 unreachable: ") || !strings.HasSuffix(got, want) {
		t.Errorf("call on gpu1: %q, want it to end with %q", got, want)
	}
	// The line is logged by the reader of the agent's stderr, which may
	// write it just after the call's result (seen once in a full run).
	line := `msg="agent on a remote host" host=gpu1 said="conch agent: --cwd /nonexistent: not a directory"`
	testutil.WaitFor(t, 5*time.Second, "the agent's line in conch serve's log", func() bool { return strings.Contains(logs.String(), line) })
}

// TestAgentCommand: conch agent speaks only frames on stdout (the hello
// comes back as one), and its --help goes to stdout.
func TestAgentCommand(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	stdout, _, code := testutil.RunConch(t, marker, "agent", "--help")
	if code != 0 || !strings.HasPrefix(stdout, "Usage: conch agent") {
		t.Errorf("conch agent --help: exit %d, %q", code, stdout)
	}
	if _, stderr, code := testutil.RunConch(t, marker, "agent", "--bogus"); code != exitUsage || !strings.Contains(stderr, "-bogus") {
		t.Errorf("conch agent --bogus: exit %d, %q", code, stderr)
	}
	cmd := exec.Command(testutil.ConchBinary(t), "agent")
	cmd.Env = testutil.Env(marker)
	cmd.Stderr = newLogBuffer(t, "conch agent")
	_, in, out, hello := startAgent(t, cmd)
	if hello.Conch != version || hello.OS != runtime.GOOS {
		t.Errorf("hello: %+v", hello)
	}
	in.Close()
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Errorf("stdout after the hello: %q", rest)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("conch agent after its stdin closed: %v", err)
	}
}

// TestAgentDegrades: on a host where no user namespace can be made (here:
// a user namespace whose limit of nested ones is 0), an agent left to its
// default sandbox runs the commands without one and says so, while one
// given the sandbox explicitly refuses to start, naming the cause.
func TestAgentDegrades(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	noUserns := func(args ...string) *exec.Cmd {
		script := `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`
		cmd := exec.Command("unshare", append([]string{"--user", "--map-root-user", "sh", "-c", script, "sh", testutil.ConchBinary(t), "agent"}, args...)...)
		cmd.Env = testutil.Env(marker)
		return cmd
	}

	cmd := noUserns()
	stderr := new(testutil.Buffer)
	cmd.Stderr = stderr
	c, in, _, hello := startAgent(t, cmd)
	if e := hello.Enforces; !strings.Contains(e, "; containment: none (") || !strings.Contains(e, "; sandbox: none (workspace-write unavailable: ") {
		t.Errorf("a host without user namespaces enforces %q", e)
	}
	c.Write(agent.Request{ID: 2, Op: agent.OpStart, Proc: 1, Start: &agent.StartArgs{Command: "echo ran"}})
	var resp agent.Response
	for resp.Op != agent.OpDone {
		resp = agent.Response{}
		if err := c.Read(&resp); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	if resp.Done.Stdout.Text != "ran\n" {
		t.Errorf("run without a sandbox: %+v", resp.Done)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("conch agent: %v", err)
	}
	if got := stderr.String(); !strings.Contains(got, `level=WARN msg="sandbox unavailable: commands run without a file sandbox" mode=workspace-write`) {
		t.Errorf("stderr lacks the warning: %q", got)
	}

	b, err := noUserns("--sandbox", "workspace-write").CombinedOutput()
	if got := string(b); err == nil || !strings.HasPrefix(got, "conch agent: containment unavailable: user namespaces are disabled (user.max_user_namespaces = 0)") {
		t.Errorf("agent with an explicit sandbox it cannot enforce: %v, %q", err, got)
	}
}

// startAgent starts cmd, a conch agent, and says hello to it.
func startAgent(t *testing.T, cmd *exec.Cmd) (c *agent.Conn, in io.WriteCloser, out io.Reader, hello *agent.Hello) {
	t.Helper()
	in, _ = cmd.StdinPipe()
	out, _ = cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c = agent.NewConn(out, in)
	c.Write(agent.Request{ID: 1, Op: agent.OpHello, Version: agent.Version})
	var resp agent.Response
	if err := c.Read(&resp); err != nil || resp.Hello == nil {
		t.Fatalf("hello: %+v, %v", resp, err)
	}
	return c, in, out, resp.Hello
}
