package tools

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// msgProjectFmt is the tool error of a bash call in a session whose
// project file is refused (Options.ProjectFiles); %v is the file's error,
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

// maxProjects bounds the project files remembered: sessions in ever new
// directories must not grow the server without limit.
const maxProjects = 256

// projects caches, by directory, what the directory's project file
// narrows, until the file's modification time or size changes.
type projects struct {
	mu    sync.Mutex
	byDir map[string]projectVersion
}

type projectVersion struct {
	mod   time.Time
	size  int64
	rules *rules.Rules            // Options.Rules narrowed by the file
	sb    *shell.SandboxNarrowing // nil: the file narrows no sandbox
	proj  *config.Project         // nil without a file
	err   error                   // the file's error, if refused
}

// projectFor returns what decides and bounds a command of sess: the
// rules (Options.Rules, narrowed by the project file of the session's
// directory, the executor's default directory when the session has none,
// when Options.ProjectFiles is set) and the narrowing of the command's
// sandbox on host (nil: none). A narrowing cannot reach another host's
// sandbox, so there it fails the call.
func (t *Toolset) projectFor(sess Session, line, host string) (*rules.Rules, *shell.SandboxNarrowing, error) {
	if !t.opts.ProjectFiles {
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
	v := t.projects.version(dir, t.opts.Rules, t.opts.Sandbox)
	if v.err == nil && v.sb != nil && host != HostLocal {
		return nil, nil, v.proj.CheckSandbox("", "", "commands on host "+host+" run outside this machine's sandbox")
	}
	return v.rules, v.sb, v.err
}

// version returns what dir's project file narrows of user and sb.
func (p *projects) version(dir string, user *rules.Rules, sb Sandbox) projectVersion {
	fi, err := os.Stat(filepath.Join(dir, config.ProjectFile))
	if errors.Is(err, fs.ErrNotExist) {
		return projectVersion{rules: user}
	}
	if err == nil {
		p.mu.Lock()
		v, ok := p.byDir[dir]
		p.mu.Unlock()
		if ok && v.mod.Equal(fi.ModTime()) && v.size == fi.Size() {
			return v
		}
	}
	// Read after the stat: a file changed in between is newer than the
	// time it is remembered by, so the next call reads it again.
	v := load(dir, user, sb)
	if err == nil {
		v.mod, v.size = fi.ModTime(), fi.Size()
		p.mu.Lock()
		if p.byDir == nil || len(p.byDir) >= maxProjects {
			p.byDir = map[string]projectVersion{}
		}
		p.byDir[dir] = v
		p.mu.Unlock()
	}
	return v
}

// load reads dir's project file once, for its rules and its sandbox.
func load(dir string, user *rules.Rules, sb Sandbox) projectVersion {
	proj, err := config.LoadProjectConfig(dir)
	if err == nil {
		mode, network := sandbox.Mode(sb.Mode), sandbox.Network(sb.Network)
		if mode == "" {
			mode = sandbox.WorkspaceWrite
		}
		if network == "" {
			network = sandbox.NetworkOn
		}
		err = proj.CheckSandbox(mode, network, sb.Unavailable)
	}
	if err != nil {
		return projectVersion{err: err}
	}
	return projectVersion{rules: config.Narrow(user, proj.Rules), sb: proj.Sandbox, proj: proj}
}
