//go:build linux

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// tcpConnect starts a TCP listener on this machine that accepts and
// closes every connection until the test ends, and returns the command
// line that connects to it and says "connected".
func tcpConnect(t *testing.T) (command, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected`, port), fmt.Sprintf("127.0.0.1:%d", port)
}

// readOnlyProject is the project file of TestProjectSandbox's first
// workspace: the stricter mode and no network.
const readOnlyProject = "[sandbox]\nmode = \"read-only\"\nnetwork = \"off\"\n"

// TestProjectSandboxRun: conch run in a project whose file asks for
// read-only and no network cannot write its cwd nor connect, and says
// so with the sandbox's markers, while elsewhere both work; a project key
// that would widen the sandbox, or one that no sandbox can honour with
// containment off, refuses the command naming file, line and key.
func TestProjectSandboxRun(t *testing.T) {
	t.Parallel()
	home, ws := sandboxDirs(t, false)
	other := filepath.Join(filepath.Dir(home), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, ".conch", "config.toml")
	writeFile(t, p, readOnlyProject)
	// The listener is on the host's loopback, which the default network
	// policy reaches only through allow_local.
	connect, addr := tcpConnect(t)
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	run := func(args ...string) (string, int) {
		out, errOut, code := testutil.RunConch(t, marker, append([]string{"run", "--network-allow-local", addr}, args...)...)
		if errOut != "" {
			t.Logf("conch run %q: stderr %q", args, errOut)
		}
		return out, code
	}

	out, _ := run("--cwd", ws, "--", "touch x && echo wrote")
	if strings.Contains(out, "wrote") || !strings.Contains(out, "[sandbox: write to "+ws+"/x denied under read-only mode; writable: ") {
		t.Errorf("touch in the read-only project:\n%s\nwant it denied under read-only mode", out)
	}
	if out, _ := run("--cwd", other, "--", "touch x && echo wrote"); out != "wrote\n" {
		t.Errorf("touch elsewhere: %q", out)
	}
	out, _ = run("--cwd", ws, "--", connect)
	if strings.Contains(out, "connected") || !strings.Contains(out, "[sandbox: network is off for commands]") {
		t.Errorf("connect in the project without network:\n%s\nwant it refused, with the network marker", out)
	}
	if out, _ := run("--cwd", other, "--", connect); out != "connected\n" {
		t.Errorf("connect elsewhere: %q", out)
	}

	for _, c := range []struct {
		project string
		args    []string
		want    string
	}{
		{"[sandbox]\nmode = \"workspace-write\"\n", []string{"--sandbox", "read-only"},
			":2: sandbox.mode: workspace-write is wider than the session's read-only; a project file may only narrow the sandbox"},
		{"[rules]\ndeny = []\n\n[sandbox]\nnetwork = \"on\"\n", []string{"--network", "off"},
			":5: sandbox.network: on is wider than the session's off; a project file may only narrow the sandbox"},
		{"[sandbox]\nwritable_roots = [\"/\"]\n", nil,
			`:2: sandbox.writable_roots: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)`},
		{readOnlyProject, []string{"--containment", "off"},
			":2: sandbox.mode: cannot narrow the sandbox: the session's commands run without a sandbox (containment off)"},
	} {
		writeFile(t, p, c.project)
		out, code := run(append(append([]string{"--cwd", ws}, c.args...), "--", "touch y; echo ran")...)
		if want := "Error: not run: bad project configuration: config " + p + c.want + "\n"; code != 125 || out != want {
			t.Errorf("project %q, flags %q: %q exit %d; want %q exit 125", c.project, c.args, out, code, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "y")); err == nil {
		t.Error("a refused project's command ran")
	}
}

// TestProjectSandboxSessions: one server, two sessions, one in a
// read-only project without network, one in a directory without a
// project file: through conch serve (MCP over HTTP, the Go SDK client)
// and conch acp (the scripted ACP client), as root and as uid 65534, the
// project's session can neither write its cwd nor connect, and the other
// session can do both.
func TestProjectSandboxSessions(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		for _, sub := range []string{"serve", "acp"} {
			t.Run(fmt.Sprintf("%s/nobody=%v", sub, nobody), func(t *testing.T) {
				t.Parallel()
				testProjectSandboxSessions(t, sub, nobody)
			})
		}
	}
}

func testProjectSandboxSessions(t *testing.T, sub string, nobody bool) {
	s := newAttackSetup(t, nobody)
	writeFile(t, filepath.Join(s.wsA, ".conch", "config.toml"), readOnlyProject)
	connect, addr := tcpConnect(t)
	// The listener is on the host's loopback, which the default network
	// policy reaches only through allow_local.
	writeFile(t, filepath.Join(s.home, ".config", "conch", "config.toml"), "[sandbox.network]\nallow_local = [\""+addr+"\"]\n")
	var a, b func(command string) string
	switch sub {
	case "serve":
		t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
		srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
		ca, cb := s.connect(t, srv, s.wsA), s.connect(t, srv, s.wsB)
		t.Cleanup(func() { ca.Close(); cb.Close() })
		a = func(command string) string { return text(t, callTool(t, ca, "bash", bash(command))) }
		b = func(command string) string { return text(t, callTool(t, cb, "bash", bash(command))) }
	case "acp":
		cmd := testutil.Conch(t, s.marker, "acp")
		cmd.Env = append(cmd.Env, s.env()...)
		if nobody {
			testutil.Unprivileged(t, cmd)
		}
		stdin, stdout, stream := startRecorded(t, cmd, s.marker, nobody)
		acp := newACPScript(t, stdin, stdout)
		sa, sb := acp.session(s.wsA), acp.newSession(s.wsB)
		if sa == "" || sb == "" {
			t.Fatalf("sessions %q and %q:\n%s", sa, sb, stream.String())
		}
		a = func(command string) string { return acp.card(sa, command) }
		b = func(command string) string { return acp.card(sb, command) }
	}

	if got := a("touch x && echo wrote"); strings.Contains(got, "wrote") || !strings.Contains(got, "[sandbox: write to "+s.wsA+"/x denied under read-only mode; writable: ") {
		t.Errorf("touch in the read-only project's session:\n%s\nwant it denied under read-only mode", got)
	}
	if got := b("touch x && echo wrote"); !strings.HasPrefix(got, "wrote") {
		t.Errorf("touch in the other session: %q", got)
	}
	if got := a(connect); strings.Contains(got, "connected") || !strings.Contains(got, "[sandbox: network is off for commands]") {
		t.Errorf("connect in the project's session:\n%s\nwant it refused, with the network marker", got)
	}
	if got := b(connect); !strings.HasPrefix(got, "connected") {
		t.Errorf("connect in the other session: %q", got)
	}
	if _, err := os.Stat(filepath.Join(s.wsA, "x")); err == nil {
		t.Error("the read-only project's session wrote its cwd")
	}
}
