package tools

import (
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// msgProjectFmt is the tool error of a bash call in a session whose
// project file is refused (Options.Projects); %v is the file's error,
// naming the file, and the line and key when there is one.
const msgProjectFmt = "not run: bad project configuration: %v"

// Sandbox is the sandbox of the default executor's commands as a project
// file sees it (Options.Sandbox).
type Sandbox struct {
	// Mode is "read-only", "workspace-write" ("" too) or "full-access".
	Mode string
	// Network is the network mode: "on" ("" too), "public", "allowlist"
	// or "off".
	Network string
	// Unavailable, when not "", says why the commands have no sandbox a
	// project could narrow (containment off or unavailable): a project
	// file's sandbox keys then fail its session's bash calls with it.
	Unavailable string
	// Enforced says that the commands run in this sandbox (or in what
	// of it the host enforces): the bash description states it, and a
	// call asking to leave it (outside_sandbox) is told when escalation
	// is off (Options.Unsandboxed nil). The zero value says nothing about
	// a sandbox.
	Enforced bool
	// Writable are the directories commands may write besides the
	// session's working directory (the temp dirs, the cache dir, the
	// configured writable roots), as the description names them.
	Writable []string
}

// Projects reads a session's project file (Options.Projects):
// internal/config's reads `.conch/config.toml`. Its methods are called
// concurrently.
type Projects interface {
	// Narrowing returns user's rules narrowed by dir's project file (user
	// itself when dir has none), the narrowing of the sandbox of the
	// commands run there (nil: none), or the file's refusal, which fails
	// the bash calls of dir's sessions.
	Narrowing(dir string, user *rules.Rules) (*rules.Rules, *shell.SandboxNarrowing, error)
	// Elsewhere returns the error of dir's file narrowing the sandbox of
	// a command that runs elsewhere, for reason (it names the file and
	// its key); nil when the file narrows no sandbox.
	Elsewhere(dir string, user *rules.Rules, reason string) error
}

// projectFor returns what decides and bounds a command of sess: the
// rules (Options.Rules, narrowed by the project file of the session's
// directory, the executor's default directory when the session has none,
// with Options.Projects) and the narrowing of the command's sandbox on
// host (nil: none). A narrowing cannot reach another host's sandbox, so
// there it fails the call.
func (t *Toolset) projectFor(sess Session, line, host string) (*rules.Rules, *shell.SandboxNarrowing, error) {
	p := t.opts.Projects
	if p == nil {
		return t.opts.Rules, nil, nil
	}
	dir := sess.Cwd
	if dir == "" {
		spec, err := t.ex.Resolve(shell.Request{Command: line})
		if err != nil {
			return nil, nil, err
		}
		dir = spec.Workdir
	}
	r, sb, err := p.Narrowing(dir, t.opts.Rules)
	if err == nil && sb != nil && host != HostLocal {
		return nil, nil, p.Elsewhere(dir, t.opts.Rules, "commands on host "+host+" run outside this machine's sandbox")
	}
	return r, sb, err
}
