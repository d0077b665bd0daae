package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// ErrProjectKey is the cause of an Error for a key a project file may
// not hold.
var ErrProjectKey = errors.New("a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)")

// Project is what a project file narrows (docs/configuration.md#project-files).
type Project struct {
	// Rules are the deny and ask rules it adds (nil: none).
	Rules *rules.Rules
	// Sandbox is the narrowing of the sandbox it asks for (nil: none),
	// judged against the effective sandbox by CheckSandbox.
	Sandbox *shell.SandboxNarrowing
	// Entries are the file's keys, for showing where each came from and
	// for naming the key that widens.
	Entries []Entry
}

// ParseProject builds what a project file narrows from its entries: it
// may hold rules.deny, rules.ask, sandbox.deny_read, sandbox.mode (any
// mode; CheckSandbox refuses one wider than the effective), the network
// mode (sandbox.network.mode, or the older sandbox.network; any mode),
// sandbox.network.deny, and sandbox.network.allow and .ask (for an
// allowlist it narrows a wider mode to), and nothing else, since a
// project (whoever wrote the repository) may only make commands
// stricter. Any other key, rules.allow, rules.unmatched,
// sandbox.writable_roots, sandbox.unix_sockets,
// sandbox.network.allow_local and sandbox.escalation included, is an
// error naming the file, the line and the key.
func ParseProject(entries []Entry) (*Project, error) {
	p := &Project{Entries: entries}
	var ruleEntries []Entry
	for _, e := range entries {
		switch e.Key {
		case "rules.deny", "rules.ask":
			ruleEntries = append(ruleEntries, e)
			continue
		case "sandbox.mode", "sandbox.network", "sandbox.network.mode", "sandbox.deny_read",
			"sandbox.network.deny", "sandbox.network.allow", "sandbox.network.ask":
		default:
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: ErrProjectKey}
		}
		if p.Sandbox == nil {
			p.Sandbox = &shell.SandboxNarrowing{}
		}
		list := e.Key == "sandbox.deny_read" || e.Key == "sandbox.network.deny" || e.Key == "sandbox.network.allow"
		if list != e.Array {
			err := errors.New("takes one value, not a list")
			if list {
				err = errors.New("takes a list of strings")
			}
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
		}
		bad := func(err error) (*Project, error) {
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
		}
		switch e.Key {
		case "sandbox.deny_read":
			p.Sandbox.DenyRead = append(p.Sandbox.DenyRead, e.Values...)
			continue
		case "sandbox.network.deny", "sandbox.network.allow":
			for _, v := range e.Values {
				if _, err := netpolicy.ParsePattern(v); err != nil {
					return bad(err)
				}
			}
			if e.Key == "sandbox.network.deny" {
				p.Sandbox.NetworkDeny = append(p.Sandbox.NetworkDeny, e.Values...)
			} else {
				p.Sandbox.NetworkAllow = append(p.Sandbox.NetworkAllow, e.Values...)
			}
			continue
		case "sandbox.network.ask":
			v, err := strconv.ParseBool(e.Values[0])
			if err != nil {
				return bad(errors.New("must be true or false"))
			}
			p.Sandbox.NetworkAsk = &v
			continue
		}
		v := e.Values[0]
		switch {
		case e.Key == "sandbox.mode" && (v == string(sandbox.ReadOnly) || v == string(sandbox.WorkspaceWrite) || v == string(sandbox.FullAccess)):
			p.Sandbox.Mode = v
		case e.Key == "sandbox.mode":
			return bad(fmt.Errorf("unknown mode %q (want read-only, workspace-write or full-access)", v))
		default:
			m, err := netpolicy.ParseMode(v)
			if err != nil {
				return bad(err)
			}
			if p.Sandbox.Network != "" {
				return bad(errors.New("the network mode is already set"))
			}
			p.Sandbox.Network = string(m)
			p.Sandbox.NetworkOff = m == netpolicy.Off
		}
	}
	var err error
	if p.Rules, err = Rules(ruleEntries); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadProjectConfig reads dir's project file (LoadProject) and builds
// what it narrows (ParseProject). No file: nothing narrowed, no entries.
func LoadProjectConfig(dir string) (*Project, error) {
	entries, err := LoadProject(dir)
	if err != nil {
		return nil, err
	}
	return ParseProject(entries)
}

// CheckSandbox refuses, naming the file, the line and the key, a
// sandbox key of p that would widen the effective sandbox (mode and
// network mode): a wider sandbox.mode or network mode; network allow
// or ask = true over a session whose mode is already allowlist (or off),
// and allow without narrowing the network mode to allowlist.
// unavailable, when not "", is why the session has no sandbox to narrow
// (containment off or unavailable): any sandbox key is then refused with
// it, since the commands would run wider than the project asked.
func (p *Project) CheckSandbox(mode sandbox.Mode, network sandbox.Network, unavailable string) error {
	narrowsTo := network
	for _, e := range p.Entries {
		if (e.Key == "sandbox.network" || e.Key == "sandbox.network.mode") && !e.Array {
			narrowsTo = sandbox.Network(e.Values[0])
		}
	}
	for _, e := range p.Entries {
		var err error
		wider := func(v string) error {
			return fmt.Errorf("%s is wider than the session's %s; a project file may only narrow the sandbox", v, network)
		}
		switch {
		case e.Key != "sandbox.mode" && e.Key != "sandbox.deny_read" && !strings.HasPrefix(e.Key, "sandbox.network"):
			continue
		case unavailable != "":
			err = fmt.Errorf("cannot narrow the sandbox: %s", unavailable)
		case e.Key == "sandbox.mode" && sandbox.Mode(e.Values[0]).WiderThan(mode):
			err = fmt.Errorf("%s is wider than the session's %s; a project file may only narrow the sandbox", e.Values[0], mode)
		case (e.Key == "sandbox.network" || e.Key == "sandbox.network.mode") && netpolicy.Mode(e.Values[0]).WiderThan(netpolicy.Mode(network)):
			err = wider(e.Values[0])
		case e.Key == "sandbox.network.allow" && (network == sandbox.NetworkAllowlist || network == sandbox.NetworkOff):
			err = fmt.Errorf("adds to the session's %s network; a project file may only narrow the sandbox", network)
		case e.Key == "sandbox.network.allow" && narrowsTo != sandbox.NetworkAllowlist:
			err = errors.New(`applies only with sandbox.network.mode = "allowlist"`)
		case e.Key == "sandbox.network.ask" && e.Values[0] == "true" && network == sandbox.NetworkAllowlist:
			err = errors.New("may not turn on questions over the session's allowlist; a project file may only narrow the sandbox")
		}
		if err != nil {
			return &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
		}
	}
	return nil
}
