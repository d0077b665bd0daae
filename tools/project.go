package tools

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/conch-dev/conch/internal/config"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// msgProjectFmt is the tool error of a bash call in a session whose
// project file is refused (Options.ProjectFiles); %v is the file's error,
// naming the file, and the line and key when there is one.
const msgProjectFmt = "not run: bad project configuration: %v"

// maxProjects bounds the project files remembered: sessions in ever new
// directories must not grow the server without limit.
const maxProjects = 256

// projects caches, by directory, the rules of the directory's project
// file merged with Options.Rules, until the file's modification time or
// size changes.
type projects struct {
	mu    sync.Mutex
	byDir map[string]projectVersion
}

type projectVersion struct {
	mod   time.Time
	size  int64
	rules *rules.Rules // Options.Rules narrowed by the file
	err   error        // the file's error, if refused
}

// rulesFor returns the rules deciding line in sess: Options.Rules,
// narrowed by the project file of the session's directory (the
// executor's default directory when the session has none) when
// Options.ProjectFiles is set.
func (t *Toolset) rulesFor(sess Session, line string) (*rules.Rules, error) {
	if !t.opts.ProjectFiles {
		return t.opts.Rules, nil
	}
	dir := sess.Cwd
	if dir == "" {
		spec, err := t.ex.Resolve(shell.Request{Command: line})
		if err != nil {
			return nil, err
		}
		dir = spec.Workdir
	}
	return t.projects.rules(dir, t.opts.Rules)
}

// rules returns user narrowed by dir's project file.
func (p *projects) rules(dir string, user *rules.Rules) (*rules.Rules, error) {
	fi, err := os.Stat(filepath.Join(dir, config.ProjectFile))
	if errors.Is(err, fs.ErrNotExist) {
		return user, nil
	}
	if err == nil {
		p.mu.Lock()
		v, ok := p.byDir[dir]
		p.mu.Unlock()
		if ok && v.mod.Equal(fi.ModTime()) && v.size == fi.Size() {
			return v.rules, v.err
		}
	}
	// Read after the stat: a file changed in between is newer than the
	// time it is remembered by, so the next call reads it again.
	proj, _, lerr := config.LoadProjectRules(dir)
	v := projectVersion{rules: config.Narrow(user, proj), err: lerr}
	if err == nil {
		v.mod, v.size = fi.ModTime(), fi.Size()
		p.mu.Lock()
		if p.byDir == nil || len(p.byDir) >= maxProjects {
			p.byDir = map[string]projectVersion{}
		}
		p.byDir[dir] = v
		p.mu.Unlock()
	}
	return v.rules, v.err
}
