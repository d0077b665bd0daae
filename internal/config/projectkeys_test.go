package config

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/sandbox"
)

// A project file's sandbox keys narrow: a mode, network off, more hidden
// paths; each key that would widen is refused naming file, line and key.
func TestProjectSandbox(t *testing.T) {
	dir := t.TempDir()
	writeProject(t, dir, "[sandbox]\nmode = \"read-only\"\nnetwork = \"off\"\ndeny_read = [\"secrets\", \"/etc/shadow\"]\n")
	proj, err := LoadProjectConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := proj.Sandbox
	if n == nil || n.Mode != "read-only" || !n.NetworkOff || strings.Join(n.DenyRead, ",") != "secrets,/etc/shadow" || proj.Rules != nil {
		t.Fatalf("LoadProjectConfig = %+v, sandbox %+v", proj, n)
	}
	for _, eff := range []struct {
		mode    sandbox.Mode
		network sandbox.Network
	}{{sandbox.ReadOnly, sandbox.NetworkOff}, {sandbox.WorkspaceWrite, sandbox.NetworkOn}, {sandbox.FullAccess, sandbox.NetworkOn}} {
		if err := proj.CheckSandbox(eff.mode, eff.network, ""); err != nil {
			t.Errorf("CheckSandbox(%s, %s): %v", eff.mode, eff.network, err)
		}
	}
	if none, err := LoadProjectConfig(t.TempDir()); err != nil || none.Sandbox != nil || none.Rules != nil || len(none.Entries) != 0 {
		t.Errorf("no file: %+v, %v", none, err)
	}
}

func TestProjectSandboxRefused(t *testing.T) {
	const only = `: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)`
	for _, c := range []struct {
		text, want string
		mode       sandbox.Mode
		network    sandbox.Network
		cause      string
	}{
		{text: "[sandbox]\nwritable_roots = [\"/\"]\n", want: ":2: sandbox.writable_roots" + only},
		{text: "[sandbox]\nunix_sockets = [\"/run/docker.sock\"]\n", want: ":2: sandbox.unix_sockets" + only},
		{text: "[sandbox]\nescalation = \"ask\"\n", want: ":2: sandbox.escalation" + only},
		{text: "containment = \"off\"\n", want: ":1: containment" + only},
		{text: "[sandbox]\nmode = \"none\"\n", want: `:2: sandbox.mode: unknown mode "none" (want read-only, workspace-write or full-access)`},
		{text: "[sandbox]\nnetwork = [\"off\"]\n", want: ":2: sandbox.network: takes one value, not a list"},
		{text: "[sandbox]\ndeny_read = \"x\"\n", want: ":2: sandbox.deny_read: takes a list of strings"},
		{text: "[sandbox]\nmode = \"workspace-write\"\n", mode: sandbox.ReadOnly, network: sandbox.NetworkOn,
			want: ":2: sandbox.mode: workspace-write is wider than the session's read-only; a project file may only narrow the sandbox"},
		{text: "[sandbox]\nmode = \"full-access\"\n", mode: sandbox.WorkspaceWrite, network: sandbox.NetworkOn,
			want: ":2: sandbox.mode: full-access is wider than the session's workspace-write; a project file may only narrow the sandbox"},
		{text: "[rules]\ndeny = []\n[sandbox]\nnetwork = \"on\"\n", mode: sandbox.WorkspaceWrite, network: sandbox.NetworkOff,
			want: ":4: sandbox.network: on is wider than the session's off; a project file may only narrow the sandbox"},
		{text: "[sandbox]\ndeny_read = [\"x\"]\n", mode: sandbox.FullAccess, network: sandbox.NetworkOn, cause: "containment off",
			want: ":2: sandbox.deny_read: cannot narrow the sandbox: containment off"},
	} {
		dir := t.TempDir()
		p := writeProject(t, dir, c.text)
		proj, err := LoadProjectConfig(dir)
		if err == nil {
			err = proj.CheckSandbox(c.mode, c.network, c.cause)
		}
		if err == nil || err.Error() != "config "+p+c.want {
			t.Errorf("%q: error %v, want config %s%s", c.text, err, p, c.want)
		}
	}
}
