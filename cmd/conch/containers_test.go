//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/remote/container"
)

// TestAgentCwdRoot: an agent started in / without --cwd (as an engine's
// exec starts it in an image whose working directory is /) works in the
// user's home, never in /, which workspace-write would make writable;
// with no home other than / it refuses to start.
func TestAgentCwdRoot(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	home := t.TempDir()
	cmd := exec.Command(testutil.ConchBinary(t), "agent", "--containment", "off")
	cmd.Dir = "/"
	cmd.Env = append(testutil.Env(marker), "HOME="+home)
	cmd.Stderr = newLogBuffer(t, "conch agent")
	_, in, _, hello := startAgent(t, cmd)
	if hello.Cwd != home {
		t.Errorf("an agent started in / works in %q, want the home %s", hello.Cwd, home)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("conch agent: %v", err)
	}

	cmd = exec.Command(testutil.ConchBinary(t), "agent")
	cmd.Dir = "/"
	cmd.Env = append(testutil.Env(marker), "HOME=/")
	out, err := cmd.CombinedOutput()
	if want := "conch agent: the working directory is / and HOME (\"/\") is no other directory: give --cwd\n"; err == nil || string(out) != want {
		t.Errorf("an agent in / with HOME=/: %v, %q; want %q", err, out, want)
	}
}

// podmanContainer is a running container of the test image, shared by
// this binary's tests under key, with runArgs.
func podmanContainer(t *testing.T, key string, runArgs ...string) string {
	t.Helper()
	engine := containertest.Podman(t)
	img := containertest.Image(t, engine, testutil.ConchBinary(t))
	return containertest.Shared(t, key, engine, img, runArgs...)
}

// serveContainer starts conch serve with cfg and connects an MCP client.
// At cleanup it checks that nothing is left here or in ctr.
func serveContainer(t *testing.T, ctr, cfg string) *mcp.ClientSession {
	t.Helper()
	marker := testutil.Marker(t)
	cmd := exec.Command(testutil.ConchBinary(t), "serve", "--config", writeConfig(t, cfg), "--grace-ms", "500")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Stderr = newLogBuffer(t, "conch serve")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		testutil.AssertNoProcesses(t, marker)
		containertest.AssertNoAgents(t, "podman", ctr)
	})
	return cs
}

// doctorHostLines runs conch doctor --host name with cfg and returns its
// output and exit status.
func doctorHostLines(t *testing.T, cfg, name string, args ...string) (string, int) {
	t.Helper()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	stdout, stderr, code := testutil.RunConch(t, marker, append([]string{"doctor", "--config", writeConfig(t, cfg), "--host", name}, args...)...)
	if stderr != "" {
		t.Logf("conch doctor's stderr:\n%s", stderr)
	}
	return stdout, code
}

// maskedHint is what an agent in a podman container with the default,
// masked /proc says of its containment.
const maskedHint = "mount /proc: operation not permitted (/proc is masked in this container; podman unmasks it with --security-opt unmask=/proc/*)"

// TestPodmanHostMasked: a host that is a podman container with the
// engine's defaults (/proc masked): conch deploys itself there and runs
// the model's commands in the container user's home, without containment
// or sandbox, which conch doctor --host says, naming the option that
// unmasks /proc; with containment required, the agent refuses to start
// and the call says why.
func TestPodmanHostMasked(t *testing.T) {
	t.Parallel()
	ctr := podmanContainer(t, "masked")
	cfg := "[hosts.box]\npodman = \"" + ctr + "\"\n"
	cs := serveContainer(t, ctr, cfg+"\n[hosts.strict]\npodman = \""+ctr+"\"\ncontainment = \"require\"\n")
	on := func(host, command string) (string, bool) {
		a := bash(command)
		a["host"] = host
		r := callTool(t, cs, "bash", a)
		return text(t, r), r.IsError
	}
	if got, isErr := on("box", "pwd; cat /run/.containerenv >/dev/null && echo in podman; exit 3"); got != "/root\nin podman\n[exit code: 3]" || isErr {
		t.Errorf("on box: %q", got)
	}
	got, isErr := on("strict", "true")
	if want := "agent exited with status 1: conch agent: containment unavailable: nsinit: start: init: " + maskedHint + "; the command did not run"; !isErr ||
		!strings.HasPrefix(got, "Error: host strict unreachable: ") || !strings.HasSuffix(got, want) {
		t.Errorf("on strict (containment require): %q, want an error ending %q", got, want)
	}

	out, code := doctorHostLines(t, cfg, "box")
	for _, line := range []string{
		"host: box (podman container " + ctr + ")\n",
		"\ncwd: /root\n",
		"\ncontainment: none (nsinit: start: init: " + maskedHint + ")\n",
		"\nsandbox: none (workspace-write unavailable: nsinit: start: init: " + maskedHint + ")\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("conch doctor --host box lacks %q:\n%s", line, out)
		}
	}
	if code != 0 || !strings.Contains(out, "\nagent: conch "+version+" (linux/") {
		t.Errorf("conch doctor --host box: exit %d\n%s", code, out)
	}
	out, code = doctorHostLines(t, cfg, "box", "--host-containment", "box=require")
	if !strings.Contains(out, "\nagent: none (host box unreachable: ") ||
		!strings.Contains(out, "agent exited with status 1: conch agent: containment unavailable: ") ||
		!strings.Contains(out, maskedHint) || code != 1 {
		t.Errorf("conch doctor --host box with containment required: exit %d\n%s", code, out)
	}
}

// TestPodmanHostContained: in a podman container that unmasks /proc, the
// agent contains its commands and sandboxes them with workspace-write in
// the container user's home: a write there works, one to /etc is denied
// (an agent that took the image's working directory / as its workspace
// let it through).
func TestPodmanHostContained(t *testing.T) {
	t.Parallel()
	ctr := podmanContainer(t, "unmasked", "--security-opt", "unmask=/proc/*")
	cfg := "[hosts.box]\npodman = \"" + ctr + "\"\n"
	cs := serveContainer(t, ctr, cfg)
	a := bash("touch ok && rm ok && echo wrote; tr '\\0' ' ' < /proc/1/cmdline; echo; touch /etc/x")
	a["host"] = "box"
	got := text(t, callTool(t, cs, "bash", a))
	if !strings.HasPrefix(got, "wrote\n/root/.cache/conch/conch-") || !strings.Contains(got, " __init \n[stderr]\ntouch: /etc/x: Permission denied\n[sandbox: write to /etc/x denied under workspace-write mode; writable: /root, ") ||
		!strings.HasSuffix(got, "\n[exit code: 1]") {
		t.Errorf("on box: %q", got)
	}
	if _, err := containertest.Output("podman", nil, "exec", ctr, "test", "-e", "/etc/x"); err == nil {
		t.Error("the sandbox let a command write /etc/x")
	}
	out, code := doctorHostLines(t, cfg, "box")
	if !strings.Contains(out, "\ncwd: /root\ncontainment: pid-namespace") || !strings.Contains(out, "\nsandbox: workspace-write, network ") || code != 0 {
		t.Errorf("conch doctor --host box: exit %d\n%s", code, out)
	}
}

// TestAgentPartialIDMap: root of a user namespace that maps only some ids
// (here `unshare -r`: uid 0 alone, setgroups denied; rootless podman and
// Kubernetes' hostUsers: false are alike) contains its commands, with an
// init that maps the ranges it has: a map of every id was refused, and
// containment was lost.
func TestAgentPartialIDMap(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command("unshare", "--user", "--map-root-user", testutil.ConchBinary(t), "agent", "--containment", "require")
	cmd.Env = testutil.Env(marker)
	cmd.Stderr = newLogBuffer(t, "conch agent")
	c, in, _, hello := startAgent(t, cmd)
	if !strings.Contains(hello.Enforces, "; containment: pid-namespace") {
		t.Errorf("root with a partial id map enforces %q", hello.Enforces)
	}
	c.Write(agent.Request{ID: 2, Op: agent.OpStart, Proc: 1, Start: &agent.StartArgs{Command: "id -u; tr -s ' ' < /proc/self/uid_map; echo $$"}})
	var resp agent.Response
	for resp.Op != agent.OpDone {
		resp = agent.Response{}
		if err := c.Read(&resp); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	if got := resp.Done.Stdout.Text; !strings.HasPrefix(got, "0\n 0 0 1\n") || strings.HasSuffix(got, "\n1\n") {
		t.Errorf("a command there: %q, want uid 0, the one-id map, and not pid 1", got)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("conch agent: %v", err)
	}
}

// TestRootlessPodmanHost: hosts of rootless podman, the engine of most
// developers' machines, driven by that user's own conch: a running
// container, and an image template (a container per session). The agent
// inside is root of a user namespace that maps only the user (to root)
// and its subordinate ids, and still contains and sandboxes its commands
// (its init maps the ranges it has; a map of every id was refused, and
// containment lost).
func TestRootlessPodmanHost(t *testing.T) {
	t.Parallel()
	rl := containertest.Rootless(t)
	img := containertest.Image(t, rl.Engine, testutil.ConchBinary(t))
	ctr := containertest.Start(t, rl.Engine, img, "--security-opt", "unmask=/proc/*")
	dir, err := os.MkdirTemp("", "conchtest-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := filepath.Join(dir, "config.toml")
	tpl := "tpl-" + strings.TrimPrefix(ctr, "conch-test-")
	if err := os.WriteFile(cfg, []byte("[hosts.box]\npodman = \""+ctr+"\"\n[hosts."+tpl+"]\nimage = \""+img+"\"\nengine = \"podman\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(rl.Uid), int(rl.Gid)); err != nil {
		t.Fatal(err)
	}
	marker := testutil.Marker(t)
	asUser := func(args ...string) *exec.Cmd {
		cmd := exec.Command(testutil.ConchBinary(t), append(args, "--config", cfg)...)
		cmd.Dir = dir
		// The user's environment, not this test's (whose XDG_CONFIG_HOME,
		// say, is root's).
		cmd.Env = append(slices.Clone(rl.Env), testutil.MarkerEnv+"="+marker, "TMPDIR="+dir, "XDG_STATE_HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: rl.Uid, Gid: rl.Gid, Groups: []uint32{}}}
		return cmd
	}

	doctor := asUser("doctor", "--host", "box")
	out, err := doctor.CombinedOutput()
	if !strings.Contains(string(out), "\ncontainment: pid-namespace\nsandbox: workspace-write, ") || err != nil {
		t.Errorf("conch doctor --host box as %d: %v\n%s", rl.Uid, err, out)
	}

	serve := asUser("serve", "--grace-ms", "500")
	serve.Stderr = newLogBuffer(t, "conch serve")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: serve}, nil)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		testutil.AssertNoProcesses(t, marker)
		containertest.AssertNoAgents(t, rl.Engine, ctr)
	})
	a := bash("id -u; tr -s ' ' < /proc/self/uid_map; tr '\\0' ' ' < /proc/1/cmdline; echo; touch ok && rm ok && echo wrote; touch /etc/x")
	a["host"] = "box"
	got := text(t, callTool(t, cs, "bash", a))
	if !strings.HasPrefix(got, "0\n 0 0 1\n 1 1 65536\n/root/.cache/conch/conch-") || !strings.Contains(got, " __init \nwrote\n[stderr]\ntouch: /etc/x: Permission denied\n[sandbox: write to /etc/x denied under workspace-write mode; writable: /root, ") ||
		!strings.HasSuffix(got, "\n[exit code: 1]") {
		t.Errorf("on box: %q", got)
	}
	if _, err := containertest.Output(rl.Engine, nil, "exec", ctr, "test", "-e", "/etc/x"); err == nil {
		t.Error("the sandbox let a command write /etc/x")
	}

	a["host"] = tpl
	if got := text(t, callTool(t, cs, "bash", a)); !strings.HasPrefix(got, "0\n 0 0 1\n 1 1 65536\n/root/.cache/conch/conch-") || !strings.Contains(got, " __init \nwrote\n[stderr]\ntouch: /etc/x: Permission denied\n") {
		t.Errorf("on %s: %q", tpl, got)
	}
	label := container.TemplateLabel + "=" + tpl
	if got := containertest.Labelled(t, rl.Engine, label); len(got) != 1 {
		t.Errorf("the template's containers during the session: %v, want one", got)
	}
	cs.Close()
	if got := containertest.Labelled(t, rl.Engine, label); len(got) != 0 {
		t.Errorf("the template's containers after the session: %v", got)
	}
}
