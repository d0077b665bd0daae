//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell/remote/container"
)

// TestHostsTemplateConfig: a host made from an image takes `image` and
// `engine`; conch config shows them; a host with both a container and an
// image, an unknown engine, an image without its engine and an engine
// without an image are refused, each saying what to write.
func TestHostsTemplateConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "[hosts.dev]\nimage = \"localhost/dev:1\"\nengine = \"podman\"\ncwd = \"/src\"\n")
	stdout, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{`hosts.dev.image = "localhost/dev:1"  # ` + p + ":2", `hosts.dev.engine = "podman"  # ` + p + ":3"} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, stdout)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"[hosts.dev]\npodman = \"devbox\"\nimage = \"localhost/dev:1\"\n", ":3: hosts.dev.image: host dev names both a running container and an image; a host is one or the other (docs/remote.md)"},
		{"[hosts.dev]\nimage = \"localhost/dev:1\"\ndocker = \"devbox\"\n", ":3: hosts.dev.docker: host dev names both a running container and an image; a host is one or the other (docs/remote.md)"},
		{"[hosts.dev]\nimage = \"localhost/dev:1\"\nssh = \"dev\"\n", ":3: hosts.dev.ssh: host dev is given two transports (a host is one of ssh, podman, docker, image, kubernetes or pod_template)"},
		{"[hosts.dev]\nimage = \"localhost/dev:1\"\nengine = \"lxc\"\n", ":3: hosts.dev.engine: engine must be one of: podman, docker"},
	} {
		p := writeConfig(t, c.text)
		_, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
		if code != 2 || !strings.Contains(stderr, "config "+p+c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.text, code, stderr, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--host-image", "dev=localhost/dev:1"}, `host dev: an image needs its engine: engine = "podman" or "docker" (--host-engine dev=ENGINE)`},
		{[]string{"--host-podman", "dev=devbox", "--host-engine", "dev=podman"}, "--host-engine dev: the engine is that of a host made from an image, and host dev has no image"},
	} {
		// Through the binary: a stack built in this process would make the
		// test binary a child subreaper whose close kills every orphan it
		// adopted, the conmon of other tests' containers included.
		_, stderr, code := testutil.RunConch(t, marker, append(append([]string{"run"}, c.args...), "--", "true")...)
		if code != 2 || stderr != "conch run: "+c.want+"\n" {
			t.Errorf("conch run %q: exit %d, stderr %q; want 2, %q", c.args, code, stderr, c.want)
		}
	}
}

// templateConfig is the configuration of a template host of the test
// image with podman, under a name of its own, for t.
func templateConfig(t *testing.T) (name, cfg string) {
	t.Helper()
	engine := containertest.Podman(t)
	img := containertest.Image(t, engine, testutil.ConchBinary(t))
	var b [4]byte
	rand.Read(b[:])
	name = "tpl-" + hex.EncodeToString(b[:])
	return name, "[hosts." + name + "]\nimage = \"" + img + "\"\nengine = \"podman\"\n"
}

// templateContainers are the containers, running or not, of the
// template host called name.
func templateContainers(t *testing.T, name string) []string {
	t.Helper()
	return containertest.Labelled(t, "podman", container.TemplateLabel+"="+name)
}

// serveTemplate starts conch serve with cfg and connects an MCP client;
// it returns the server's process too.
func serveTemplate(t *testing.T, marker, cfg string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(testutil.ConchBinary(t), "serve", "--config", writeConfig(t, cfg), "--grace-ms", "500")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Stderr = newLogBuffer(t, "conch serve")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	return cs, cmd
}

// TestPodmanTemplateHost: through conch serve, a template host starts a
// container of its image on the session's first command, where the
// agent contains and sandboxes the commands (the container unmasks
// /proc); the session's end, with the server's, removes it. conch doctor
// --host says what a command gets there, and leaves no container.
func TestPodmanTemplateHost(t *testing.T) {
	t.Parallel()
	name, cfg := templateConfig(t)
	marker := testutil.Marker(t)
	cs, _ := serveTemplate(t, marker, cfg)
	if got := templateContainers(t, name); len(got) != 0 {
		t.Errorf("containers before the first command: %v", got)
	}
	a := bash("tr '\\0' ' ' < /proc/1/cmdline; echo; touch /etc/x")
	a["host"] = name
	got := text(t, callTool(t, cs, "bash", a))
	if !strings.HasPrefix(got, "/root/.cache/conch/conch-") || !strings.Contains(got, " __init \n[stderr]\ntouch: /etc/x: Permission denied\n") {
		t.Errorf("on %s: %q, want the agent's init as pid 1 and a write to /etc denied", name, got)
	}
	if got := templateContainers(t, name); len(got) != 1 {
		t.Errorf("containers after the first command: %v, want one", got)
	}
	a = bash("echo again")
	a["host"] = name
	if got := text(t, callTool(t, cs, "bash", a)); got != "again\n" {
		t.Errorf("the second command: %q", got)
	}
	if got := templateContainers(t, name); len(got) != 1 {
		t.Errorf("containers after the second command: %v, want the same one", got)
	}
	cs.Close()
	testutil.AssertNoProcesses(t, marker)
	if got := templateContainers(t, name); len(got) != 0 {
		t.Errorf("containers after the session and the server ended: %v", got)
	}

	out, code := doctorHostLines(t, cfg, name)
	if !strings.Contains(out, "host: "+name+" (podman container of image localhost/conch-test:") ||
		!strings.Contains(out, "\ncwd: /root\ncontainment: pid-namespace") || code != 0 {
		t.Errorf("conch doctor --host %s: exit %d\n%s", name, code, out)
	}
	if got := templateContainers(t, name); len(got) != 0 {
		t.Errorf("containers after conch doctor: %v", got)
	}
}

// TestTemplateServerKilled: a server killed with SIGKILL removes nothing,
// and its container would wait forever; the next server's first
// template container removes it.
func TestTemplateServerKilled(t *testing.T) {
	t.Parallel()
	name, cfg := templateConfig(t)
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cs, cmd := serveTemplate(t, marker, cfg)
	a := bash("echo first")
	a["host"] = name
	if got := text(t, callTool(t, cs, "bash", a)); got != "first\n" {
		t.Errorf("on %s: %q", name, got)
	}
	left := templateContainers(t, name)
	if len(left) != 1 {
		t.Fatalf("containers after the first command: %v, want one", left)
	}
	cmd.Process.Kill()
	cs.Close()
	if got := templateContainers(t, name); len(got) != 1 || got[0] != left[0] {
		t.Fatalf("containers after the server was killed: %v, want %s left", got, left[0])
	}
	t.Cleanup(func() { containertest.Remove("podman", left[0]) }) // should the test fail

	cs, _ = serveTemplate(t, marker, cfg)
	a["command"] = "echo second"
	if got := text(t, callTool(t, cs, "bash", a)); got != "second\n" {
		t.Errorf("on %s after a restart: %q", name, got)
	}
	if got := templateContainers(t, name); len(got) != 1 || got[0] == left[0] {
		t.Errorf("containers after the next server's first command: %v, want a new one alone (%s removed)", got, left[0])
	}
	cs.Close()
	if got := templateContainers(t, name); len(got) != 0 {
		t.Errorf("containers after the second server ended: %v", got)
	}
}
