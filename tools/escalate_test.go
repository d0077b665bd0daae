//go:build linux

package tools_test

import (
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

// TestDeniedBySandbox: the reason a question after a denial gives for
// each kind of denial, in the order the sandbox recorded them, and no
// question without one: a sandbox marker naming no denial recorded (a
// note drawn from what the command printed) asks nothing
// (docs/sandbox.md#escalation).
func TestDeniedBySandbox(t *testing.T) {
	ws := &shell.SandboxReport{Mode: "workspace-write", Network: "off"}
	with := func(d ...shell.SandboxDenial) *shell.SandboxReport {
		r := *ws
		r.Denied = d
		return &r
	}
	write := func(p string) shell.SandboxDenial { return shell.SandboxDenial{Path: p, Op: "write"} }
	network := shell.SandboxDenial{Op: "network"}
	for _, c := range []struct {
		name   string
		res    shell.Result
		reason string
		ok     bool
	}{
		{"no sandbox", shell.Result{}, "", false},
		{"nothing denied", shell.Result{Sandbox: with()}, "", false},
		{"another note", shell.Result{Sandbox: with(), Notes: []string{"[something else]"}}, "", false},
		{"one write", shell.Result{Sandbox: with(write("/h/x"))}, "the sandbox denied a write to /h/x", true},
		{"two writes", shell.Result{Sandbox: with(write("/h/x"), write("/h/y"))}, "the sandbox denied a write to /h/x, /h/y", true},
		{"network", shell.Result{Sandbox: with(network)}, "the sandbox denied network access", true},
		{"network and write", shell.Result{Sandbox: with(network, write("/h/x"))}, "the sandbox denied network access and a write to /h/x", true},
		{"write, read, write", shell.Result{Sandbox: with(write("/h/x"), shell.SandboxDenial{Path: "/s", Op: "read"}, write("/h/y"), write("/h/x"))},
			"the sandbox denied a write to /h/x, /h/y and a read of /s", true},
		{"a marker without a record", shell.Result{Sandbox: with(), Notes: []string{"[sandbox: file access denied under workspace-write mode]"}}, "", false},
	} {
		reason, ok := tools.DeniedBySandbox(c.res)
		if reason != c.reason || ok != c.ok {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, reason, ok, c.reason, c.ok)
		}
	}
}
