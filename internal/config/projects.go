package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// Projects reads the project files of sessions' directories for the
// tools (tools.Options.Projects): what each narrows of the user's rules
// and of the sandbox the server's commands run in, read again when the
// file's modification time or size changes. It is safe for concurrent
// use.
type Projects struct {
	mode        sandbox.Mode
	network     sandbox.Network
	unavailable string

	mu    sync.Mutex
	byDir map[string]projectVersion
}

// NewProjects returns the project files of a server whose commands run
// in a sandbox of mode and network ("" for workspace-write and on); a
// non-empty unavailable says why they have none a project could narrow,
// and fails the bash calls of a project whose file narrows it.
func NewProjects(mode, network, unavailable string) *Projects {
	p := &Projects{mode: sandbox.Mode(mode), network: sandbox.Network(network), unavailable: unavailable}
	if p.mode == "" {
		p.mode = sandbox.WorkspaceWrite
	}
	if p.network == "" {
		p.network = sandbox.NetworkOn
	}
	return p
}

// maxProjects bounds the project files remembered: sessions in ever new
// directories must not grow the server without limit.
const maxProjects = 256

type projectVersion struct {
	mod  time.Time
	size int64
	user *rules.Rules // the rules narrowed, as given
	r    *rules.Rules
	sb   *shell.SandboxNarrowing // nil: the file narrows no sandbox
	proj *Project                // nil without a file
	err  error                   // the file's error, if refused
}

// Narrowing implements tools.Projects: user's rules narrowed by dir's
// project file (user itself without one), the narrowing of the sandbox
// (nil: none), or the file's refusal.
func (p *Projects) Narrowing(dir string, user *rules.Rules) (*rules.Rules, *shell.SandboxNarrowing, error) {
	v := p.version(dir, user)
	return v.r, v.sb, v.err
}

// Elsewhere implements tools.Projects: the error, naming dir's project
// file and its sandbox key, of a narrowing that cannot reach a command
// run elsewhere, for reason; nil when the file narrows no sandbox.
func (p *Projects) Elsewhere(dir string, user *rules.Rules, reason string) error {
	v := p.version(dir, user)
	if v.err != nil || v.sb == nil {
		return v.err
	}
	return v.proj.CheckSandbox("", "", reason)
}

// version returns what dir's project file narrows of user.
func (p *Projects) version(dir string, user *rules.Rules) projectVersion {
	fi, err := os.Stat(filepath.Join(dir, ProjectFile))
	if errors.Is(err, fs.ErrNotExist) {
		return projectVersion{r: user}
	}
	if err == nil {
		p.mu.Lock()
		v, ok := p.byDir[dir]
		p.mu.Unlock()
		if ok && v.mod.Equal(fi.ModTime()) && v.size == fi.Size() && v.user == user {
			return v
		}
	}
	// Read after the stat: a file changed in between is newer than the
	// time it is remembered by, so the next call reads it again.
	v := p.load(dir, user)
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
func (p *Projects) load(dir string, user *rules.Rules) projectVersion {
	proj, err := LoadProjectConfig(dir)
	if err == nil {
		err = proj.CheckSandbox(p.mode, p.network, p.unavailable)
	}
	if err != nil {
		return projectVersion{user: user, err: err}
	}
	return projectVersion{user: user, r: Narrow(user, proj.Rules), sb: proj.Sandbox, proj: proj}
}
