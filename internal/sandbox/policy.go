// Package sandbox describes what a session's commands may touch (a
// Policy), resolves it into the paths the kernel is told about (a Plan),
// enforces a Plan inside a contained init (Linux: mounts, Landlock,
// seccomp), and attributes a failed command's errors to the sandbox when,
// and only when, the sandbox caused them.
//
// The package restricts nothing by itself being imported: Landlock and
// seccomp bind the whole calling process (or thread), so Restrict must
// only ever run in the init of package nsinit, never in the server.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conch-dev/conch/internal/netpolicy"
)

// Mode says where commands may write.
type Mode string

const (
	// ReadOnly: commands may write only /dev/null and the temp dirs.
	ReadOnly Mode = "read-only"
	// WorkspaceWrite (the default): the workspace, the temp dirs, the
	// user's cache dir and the configured writable roots.
	WorkspaceWrite Mode = "workspace-write"
	// FullAccess: no file or network restriction.
	FullAccess Mode = "full-access"
)

// Network is how commands reach the network: the network mode
// (docs/sandbox.md#network).
type Network string

const (
	NetworkOn  Network = "on"
	NetworkOff Network = "off"
	// NetworkPublic and NetworkAllowlist send the session's traffic
	// through conch's stack, which applies Policy.Net to each connection
	// (package egress).
	NetworkPublic    Network = "public"
	NetworkAllowlist Network = "allowlist"
)

// Policy is the sandbox of a session as configured: the flags
// --sandbox, --network, --writable-root and the [sandbox] section.
type Policy struct {
	Mode    Mode    // "" means WorkspaceWrite
	Network Network // "" means NetworkOn
	// Net is the rest of the network policy (allow, deny, allow_local,
	// ask, conch's own listeners); its Mode is Network's.
	Net netpolicy.Policy
	// Workspace is the session's working directory: writable in
	// WorkspaceWrite.
	Workspace string
	// WritableRoots are more writable directories (WorkspaceWrite).
	WritableRoots []string
	// TempDirs are writable in ReadOnly and WorkspaceWrite: the temp dir
	// conch gives commands, /tmp, $TMPDIR.
	TempDirs []string
	// Caches are the user's cache directories (cachelayer.Dirs, made by
	// cachelayer.Ensure). In WorkspaceWrite, with CacheLayer set, each
	// is covered by conch's copy-on-write cache layer and so writable to
	// commands, without a write ever reaching the user's own directory;
	// without CacheLayer they stay read-only, like the rest of the home.
	Caches []string
	// CacheLayer is the directory of conch's cache layer (conch's state
	// directory's cache-layer: cachelayer's Begin). List it, or a
	// directory above it, in Hidden.
	CacheLayer string
	// DenyRead paths are hidden: shown as empty, neither readable nor
	// writable.
	DenyRead []string
	// UnixSockets are the unix socket paths commands may connect to; any
	// other unix socket connection is denied (not in FullAccess).
	UnixSockets []string
	// Protected paths stay read-only even inside a writable root. Resolve
	// adds the git ones it finds, and each writable root's .conch
	// directory (a project file a command could otherwise rewrite to
	// drop its narrowing).
	Protected []string
	// Hidden paths are conch's own: its configuration, state and runtime
	// directories (the HTTP token, ACP session files, the cache layer).
	// Like DenyRead they are covered, a directory by an empty read-only
	// tmpfs, a file by /dev/null, but they are not the user's choice and
	// attribution does not name them; a writable root inside one (a temp
	// dir in the state directory, say) is shown through the cover.
	Hidden []string
	// SearchCache, when set, is a directory where Resolve keeps the
	// record of its repository search of each root, so that the next
	// Resolve checks each directory with one lstat, reading only those
	// changed since (see searchRacy). Commands must not be able to write
	// it: list it, or a directory above it, in Hidden.
	SearchCache string
}

// Plan is a Policy resolved into absolute, cleaned paths, with the git
// directories found under the writable roots: what the init enforces and
// what attribution judges against. It travels to the init as JSON.
type Plan struct {
	Mode    Mode    `json:"mode"`
	Network Network `json:"network"`
	// Writable are the directories commands may write (none in
	// FullAccess, where everything is).
	Writable []string `json:"writable,omitempty"`
	// Protected are existing files and directories inside Writable made
	// read-only.
	Protected []string `json:"protected,omitempty"`
	// Pinned are the git directories of the repositories found: each is
	// made a mount point of its own, which cannot be renamed or removed,
	// so a command cannot move a repository's .git aside and put a copy
	// with writable hooks in its place.
	Pinned      []string `json:"pinned,omitempty"`
	DenyRead    []string `json:"denyRead,omitempty"`
	UnixSockets []string `json:"unixSockets,omitempty"`
	// Hidden are conch's own directories and files, covered like
	// DenyRead, with the writable roots inside them shown through.
	Hidden []string `json:"hidden,omitempty"`
	// Caches are the user's cache directories covered by the cache
	// layer at CacheLayer (they are in Writable too): see
	// Policy.Caches.
	Caches     []string `json:"caches,omitempty"`
	CacheLayer string   `json:"cacheLayer,omitempty"`
	// Net is the network policy, Mode equal to Network.
	Net netpolicy.Policy `json:"net"`

	// policy is the Policy Resolve made the Plan from (nil for a Plan
	// made otherwise, one read from JSON in the init say), for
	// ForWorkspace.
	policy *Policy
}

// ForWorkspace returns the plan of the Policy p was resolved from, with
// dir as its workspace: the plan of another session of the same
// configuration, whose cwd is dir (docs/sandbox.md#in-conch). It is p
// itself when dir is already p's workspace or p is full-access (whose
// files nothing restricts, wherever its workspace), and an error for
// another Plan not made by Resolve. Like Resolve, it reads the disk.
func (p *Plan) ForWorkspace(dir string) (*Plan, error) {
	if p.Mode == FullAccess {
		return p, nil
	}
	if p.policy == nil {
		return nil, errors.New("sandbox: the plan was not resolved from a policy")
	}
	if filepath.Clean(dir) == filepath.Clean(p.policy.Workspace) {
		return p, nil
	}
	pol := *p.policy
	pol.Workspace = dir
	return pol.Resolve()
}

// WiderThan reports whether m lets commands write more than o:
// full-access is wider than workspace-write, which is wider than
// read-only ("" is workspace-write, an unknown mode the widest).
func (m Mode) WiderThan(o Mode) bool { return m.rank() > o.rank() }

func (m Mode) rank() int {
	switch m {
	case ReadOnly:
		return 0
	case WorkspaceWrite, "":
		return 1
	case FullAccess:
		return 2
	}
	return 3
}

// Narrowed returns the plan of the Policy p was resolved from, with dir
// as its workspace ("": p's), made stricter by a project
// (docs/sandbox.md#project-files): mode, when not "", no wider than p's;
// network off when networkOff; denyRead hidden too (relative paths in
// the workspace). It is ForWorkspace and the narrowing in one
// resolution. It is an error for a mode wider than p's, and for a Plan
// not made by Resolve. Like Resolve, it reads the disk.
func (p *Plan) Narrowed(dir string, mode Mode, networkOff bool, denyRead []string) (*Plan, error) {
	if mode.WiderThan(p.Mode) {
		return nil, fmt.Errorf("sandbox: a project may not widen %s to %s", p.Mode, mode)
	}
	if p.policy == nil {
		return nil, errors.New("sandbox: the plan was not resolved from a policy")
	}
	pol := *p.policy
	pol.Mode = p.Mode
	if dir != "" {
		pol.Workspace = dir
	}
	if mode != "" {
		pol.Mode = mode
	}
	if networkOff {
		pol.Network = NetworkOff
	}
	pol.DenyRead = append(slices.Clip(pol.DenyRead), denyRead...)
	return pol.Resolve()
}

// Bounds of the search for repositories under a writable root: deep
// trees (node_modules, vendored checkouts) must not make a session's
// start slow.
const (
	maxSearchDepth = 6
	maxSearchDirs  = 20000
)

// Resolve checks p and resolves it into a Plan: paths made absolute
// (relative to the workspace), symlinks resolved, and for every
// repository found under the workspace and the writable roots (to depth
// 6, at most 20000 directories, node_modules skipped), its .git/hooks and
// .git/config protected, and so those of its submodules (in
// .git/modules) and every linked worktree's config.worktree. A repository's git directory that lies outside
// the writable roots (the workspace is a subdirectory of a repository, or
// a linked worktree whose gitdir is in the main checkout) is made
// writable, so that commits work, with its hooks and config protected.
// A missing .git/hooks is created first: it could otherwise be created by
// a command and run by the next git outside the sandbox. Each git
// directory is pinned (see Plan.Pinned), and a linked worktree's or
// submodule's .git file is protected.
func (p Policy) Resolve() (*Plan, error) {
	pl := &Plan{Mode: p.Mode, Network: p.Network, policy: &p}
	if pl.Mode == "" {
		pl.Mode = WorkspaceWrite
	}
	if pl.Network == "" {
		pl.Network = NetworkOn
	}
	switch pl.Mode {
	case ReadOnly, WorkspaceWrite, FullAccess:
	default:
		return nil, fmt.Errorf("sandbox: unknown mode %q (want read-only, workspace-write or full-access)", p.Mode)
	}
	if _, err := netpolicy.ParseMode(string(pl.Network)); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	pl.Net = p.Net
	pl.Net.Mode = netpolicy.Mode(pl.Network)
	if _, err := pl.Net.Compile(); err != nil {
		return nil, fmt.Errorf("sandbox: network: %w", err)
	}
	abs := func(path string) string {
		if path == "" {
			return ""
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(p.Workspace, path)
		}
		if r, err := filepath.EvalSymlinks(path); err == nil {
			return r
		}
		return filepath.Clean(path)
	}
	absAll := func(paths []string) []string {
		var out []string
		for _, path := range paths {
			if a := abs(path); a != "" && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
		return out
	}
	pl.DenyRead = absAll(p.DenyRead)
	pl.UnixSockets = absAll(p.UnixSockets)
	if pl.Mode == FullAccess {
		return pl, nil
	}
	var searched []string // the roots in which repositories are looked for
	switch pl.Mode {
	case ReadOnly:
		pl.Writable = absAll(p.TempDirs)
	case WorkspaceWrite:
		if p.Workspace == "" {
			return nil, fmt.Errorf("sandbox: workspace-write mode needs a workspace")
		}
		searched = absAll(append([]string{p.Workspace}, p.WritableRoots...))
		pl.Writable = absAll(append(slices.Clone(searched), p.TempDirs...))
		if p.CacheLayer != "" {
			pl.CacheLayer = abs(p.CacheLayer)
			pl.Caches = cacheDirs(absAll(p.Caches), pl.Writable, pl.CacheLayer)
			pl.Writable = append(pl.Writable, pl.Caches...)
		}
	}
	protected := absAll(p.Protected)
	for _, root := range searched {
		// A project's file: rewritten, it would drop its narrowing.
		protected = append(protected, filepath.Join(root, ".conch"))
	}
	// What commands could write before any git directory is added: a
	// .git entry there may have been planted by an earlier command.
	plantable := slices.Clone(pl.Writable)
	var gitDirs []string
	for _, root := range searched {
		s := newSearcher(p.SearchCache, root)
		repos := findRepos(root, s)
		s.save()
		// The workspace may be a subdirectory of a repository (and only
		// then is the repository above it its own: a dotfiles repository
		// in the home above a project is not).
		if !slices.Contains(repos, root) {
			if top := enclosingRepo(root); top != "" {
				repos = append(repos, top)
			}
		}
		for _, dir := range repos {
			// A linked worktree's or a submodule's .git file: rewritten,
			// it could point at a git directory with any hooks.
			if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil && fi.Mode().IsRegular() {
				protected = append(protected, filepath.Join(dir, ".git"))
			}
			for _, gd := range gitDirsOf(dir, plantable) {
				gitDirs = append(gitDirs, gd)
				// Submodules keep their git directories, hooks and
				// config included, in the superproject's.
				gitDirs = append(gitDirs, findGitDirs(filepath.Join(gd, "modules"))...)
			}
		}
	}
	for _, gd := range gitDirs {
		if slices.Contains(pl.Pinned, gd) {
			continue
		}
		pl.Pinned = append(pl.Pinned, gd)
		if !within(gd, pl.Writable) {
			pl.Writable = append(pl.Writable, gd)
		}
		hooks := filepath.Join(gd, "hooks")
		if _, err := os.Lstat(filepath.Join(gd, "objects")); err == nil {
			// A repository's own git directory, not a worktree's.
			if _, err := os.Lstat(hooks); os.IsNotExist(err) {
				os.Mkdir(hooks, 0o755)
			}
		}
		protected = append(protected, hooks, filepath.Join(gd, "config"), filepath.Join(gd, "config.worktree"))
		// Every linked worktree's own configuration (it may set
		// core.hooksPath for that worktree).
		if wts, err := filepath.Glob(filepath.Join(gd, "worktrees", "*", "config.worktree")); err == nil {
			protected = append(protected, wts...)
		}
	}
	for _, path := range protected {
		if _, err := os.Lstat(path); err == nil && within(path, pl.Writable) && !slices.Contains(pl.Protected, path) {
			pl.Protected = append(pl.Protected, path)
		}
	}
	for _, path := range absAll(p.Hidden) {
		// One that is itself a writable root (a temp dir) stays: there is
		// nothing left to hide around it.
		if _, err := os.Lstat(path); err == nil && !slices.Contains(pl.Writable, path) && !slices.Contains(pl.Hidden, path) {
			pl.Hidden = append(pl.Hidden, path)
		}
	}
	return pl, nil
}

// WithoutCaches is p with no cache layer: its caches read-only again,
// for a session whose layer could not be made.
func (p *Plan) WithoutCaches() *Plan {
	q := *p
	q.Writable = slices.DeleteFunc(slices.Clone(p.Writable), func(w string) bool { return slices.Contains(p.Caches, w) })
	q.Caches, q.CacheLayer = nil, ""
	return &q
}

// cacheDirs are the caches the layer covers: existing directories, not
// below another one (its layer covers it), and holding neither a
// writable root (whose writes must reach the disk) nor the layer itself.
func cacheDirs(caches, writable []string, layer string) []string {
	var out []string
	for _, c := range caches {
		if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
			continue
		}
		holds := func(paths ...string) bool {
			for _, p := range paths {
				if within(p, []string{c}) {
					return true
				}
			}
			return false
		}
		nested := slices.ContainsFunc(caches, func(o string) bool { return o != c && within(c, []string{o}) })
		if !nested && !holds(writable...) && !holds(layer) {
			out = append(out, c)
		}
	}
	return out
}

// findRepos returns the directories under root (root included) that hold
// a .git entry, searching as Resolve says, reading directories with s.
func findRepos(root string, s *searcher) []string {
	var repos []string
	seen := 0
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		if seen >= maxSearchDirs {
			return
		}
		seen++
		git, subdirs, ok := s.read(dir)
		if !ok {
			return
		}
		if git {
			repos = append(repos, dir)
		}
		if depth >= maxSearchDepth {
			return
		}
		for _, name := range subdirs {
			walk(filepath.Join(dir, name), depth+1)
		}
	}
	walk(root, 0)
	return repos
}

// findGitDirs returns the git directories (holding objects and HEAD)
// under dir, to depth 4: the submodules' under a superproject's
// .git/modules, nested ones included.
func findGitDirs(dir string) []string {
	var out []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		ents, err := os.ReadDir(dir)
		if err != nil || depth > 4 {
			return
		}
		if _, err := os.Lstat(filepath.Join(dir, "HEAD")); err == nil {
			if _, err := os.Lstat(filepath.Join(dir, "objects")); err == nil {
				out = append(out, dir)
			}
		}
		for _, e := range ents {
			if e.IsDir() && e.Name() != "objects" && e.Name() != "refs" && e.Name() != "logs" {
				walk(filepath.Join(dir, e.Name()), depth+1)
			}
		}
	}
	walk(dir, 0)
	return out
}

// enclosingRepo returns the nearest proper ancestor of dir holding a .git
// entry, or "".
func enclosingRepo(dir string) string {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// gitDirsOf returns the git directories of the repository in dir: its
// .git directory; or for a linked worktree (a .git file saying
// "gitdir: <path>"), that path and the common git directory it names in
// its commondir file.
func gitDirsOf(dir string, plantable []string) []string {
	dotgit := filepath.Join(dir, ".git")
	// A .git entry where commands can write may have been planted
	// (`ln -s ~ sub/.git`, or a .git file saying `gitdir: /home/me`): the
	// git directory it names is made writable only where commands could
	// write already, or where the repository's own files, which no
	// command could have written, say it is this checkout's.
	planted := within(dotgit, plantable)
	fi, err := os.Lstat(dotgit)
	if err != nil {
		return nil
	}
	switch {
	case fi.IsDir():
		return []string{resolved(dotgit)}
	case fi.Mode()&os.ModeSymlink != 0:
		gd := resolved(dotgit)
		if st, err := os.Stat(gd); err != nil || !st.IsDir() || planted && !within(gd, plantable) {
			return nil
		}
		return []string{gd}
	}
	b, err := os.ReadFile(dotgit)
	if err != nil {
		return nil
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return nil
	}
	gd := relTo(dir, strings.TrimSpace(target))
	if planted && !within(gd, plantable) && !linksBack(gd, dotgit) {
		return nil
	}
	dirs := []string{gd}
	if c, err := os.ReadFile(filepath.Join(gd, "commondir")); err == nil {
		common := relTo(gd, strings.TrimSpace(string(c)))
		// A commondir file where commands can write may name any
		// directory; a worktree's git directory lies in its common
		// directory's worktrees/.
		if !within(gd, plantable) || within(common, plantable) || within(gd, []string{filepath.Join(common, "worktrees")}) {
			dirs = append(dirs, common)
		}
	}
	return dirs
}

// linksBack reports whether git directory gd is that of the linked
// worktree whose .git file is dotgit: git records the worktree's .git
// file in the git directory's gitdir file.
func linksBack(gd, dotgit string) bool {
	b, err := os.ReadFile(filepath.Join(gd, "gitdir"))
	return err == nil && resolved(strings.TrimSpace(string(b))) == resolved(dotgit)
}

func relTo(base, path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(base, path)
	}
	return resolved(path)
}

func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// within reports whether path is one of roots or below one.
func within(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}
