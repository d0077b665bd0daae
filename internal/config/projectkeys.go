package config

import (
	"errors"
	"fmt"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// ErrProjectKey is the cause of an Error for a key a project file may
// not hold.
var ErrProjectKey = errors.New("a project file may only add rules.deny, rules.ask and sandbox.deny_read, and set a stricter sandbox.mode or sandbox.network = \"off\"")

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
// mode; CheckSandbox refuses one wider than the effective) and
// sandbox.network = "off" and nothing else, since a project (whoever
// wrote the repository) may only make commands stricter. Any other key,
// rules.allow, rules.unmatched, sandbox.writable_roots,
// sandbox.unix_sockets and sandbox.escalation included, is an error
// naming the file, the line and the key.
func ParseProject(entries []Entry) (*Project, error) {
	p := &Project{Entries: entries}
	var ruleEntries []Entry
	for _, e := range entries {
		switch e.Key {
		case "rules.deny", "rules.ask":
			ruleEntries = append(ruleEntries, e)
			continue
		case "sandbox.mode", "sandbox.network", "sandbox.deny_read":
		default:
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: ErrProjectKey}
		}
		if p.Sandbox == nil {
			p.Sandbox = &shell.SandboxNarrowing{}
		}
		if e.Key == "sandbox.deny_read" {
			if !e.Array {
				return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes a list of strings")}
			}
			p.Sandbox.DenyRead = append(p.Sandbox.DenyRead, e.Values...)
			continue
		}
		if e.Array {
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: errors.New("takes one value, not a list")}
		}
		v := e.Values[0]
		switch {
		case e.Key == "sandbox.mode" && (v == string(sandbox.ReadOnly) || v == string(sandbox.WorkspaceWrite) || v == string(sandbox.FullAccess)):
			p.Sandbox.Mode = v
		case e.Key == "sandbox.mode":
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: fmt.Errorf("unknown mode %q (want read-only, workspace-write or full-access)", v)}
		case v == string(sandbox.NetworkOff):
			p.Sandbox.NetworkOff = true
		case v != string(sandbox.NetworkOn):
			return nil, &Error{File: e.File, Line: e.Line, Key: e.Key, Err: fmt.Errorf("unknown network %q (want on or off)", v)}
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
// network): a wider sandbox.mode, or sandbox.network = "on" over an
// effective "off". unavailable, when not "", is why the session has no
// sandbox to narrow (containment off or unavailable): any sandbox key
// is then refused with it, since the commands would run wider than the
// project asked.
func (p *Project) CheckSandbox(mode sandbox.Mode, network sandbox.Network, unavailable string) error {
	for _, e := range p.Entries {
		var err error
		switch {
		case e.Key != "sandbox.mode" && e.Key != "sandbox.network" && e.Key != "sandbox.deny_read":
			continue
		case unavailable != "":
			err = fmt.Errorf("cannot narrow the sandbox: %s", unavailable)
		case e.Key == "sandbox.mode" && sandbox.Mode(e.Values[0]).WiderThan(mode):
			err = fmt.Errorf("%s is wider than the session's %s; a project file may only narrow the sandbox", e.Values[0], mode)
		case e.Key == "sandbox.network" && e.Values[0] == string(sandbox.NetworkOn) && network == sandbox.NetworkOff:
			err = fmt.Errorf("on is wider than the session's off; a project file may only narrow the sandbox")
		}
		if err != nil {
			return &Error{File: e.File, Line: e.Line, Key: e.Key, Err: err}
		}
	}
	return nil
}
