//go:build linux

// Package contained is the provider of the shell seam that runs a
// session's commands inside a per-session init (internal/nsinit): their
// own user, PID and mount namespaces, where the kernel kills everything
// when the init ends. It is the local provider plus a spawner: output
// capture, timeouts, kills and results are the local provider's.
package contained

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// New returns a local executor of opts whose commands run in one init
// per owner (Request.Owner), started with initOpts (nil: conch's own
// binary, which serves it as `conch __init`). An owner's init starts with
// its first command and ends with EndOwner, when the kernel kills
// everything the owner's commands left, or with Close. Each owner's init
// shows its commands the owner's own spill directory and none of the
// others', and enforces initOpts.Sandbox for the owner's workspace
// (Request.Workspace; the plan as given for ""), narrowed by the
// Request.Narrowing of the owner's first command. A command with a
// Narrowing is refused (local.ErrNoSandbox) when initOpts has no
// sandbox to narrow.
//
// New starts and ends one init first, to learn what this host enforces
// (see Unenforced): when the host allows no user or PID namespaces the
// error is an *nsinit.UnavailableError naming the cause.
func New(opts *local.Options, initOpts *nsinit.Options) (*local.Executor, error) {
	var o local.Options
	if opts != nil {
		o = *opts
	}
	if o.Spawner != nil {
		return nil, errors.New("contained: Options.Spawner is the init's")
	}
	sp := &spawner{sessions: make(map[string]*session)}
	if initOpts != nil {
		sp.init = *initOpts
	}
	probe, err := nsinit.Start(&sp.init)
	if err != nil {
		return nil, err
	}
	sp.unenforced = probe.Unenforced()
	if err := probe.Close(); err != nil {
		return nil, fmt.Errorf("contained: end the first init: %w", err)
	}
	o.Spawner = sp
	ex, err := local.New(&o)
	if err != nil {
		return nil, fmt.Errorf("contained: %w", err)
	}
	sp.ex = ex
	return ex, nil
}

// spawner spawns each command through its owner's init.
type spawner struct {
	init       nsinit.Options  // every init's; Sandbox for the default workspace
	ex         *local.Executor // for the owners' spill directories
	unenforced []string

	mu       sync.Mutex
	sessions map[string]*session // by owner
}

// session is one owner's init. ready is closed once in and plan, or err,
// are set; they do not change after.
type session struct {
	ready chan struct{}
	in    *nsinit.Init
	plan  *sandbox.Plan // nil without a sandbox
	err   error
}

var (
	_ local.Spawner   = (*spawner)(nil)
	_ local.Annotator = (*spawner)(nil)
)

// Spawn implements local.Spawner: the command runs in its owner's init,
// started first if the owner has none.
func (s *spawner) Spawn(c local.Command) (local.Child, error) {
	ss, err := s.session(c)
	if err != nil {
		return nil, err
	}
	return ss.in.Spawn(nsinit.Command{
		Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, Terminal: c.Terminal,
	})
}

// session returns c's owner's init, starting it if the owner has none:
// the first command starts it, commands arriving meanwhile wait for it.
// A start that failed is forgotten, so that the owner's next command
// tries again.
func (s *spawner) session(c local.Command) (*session, error) {
	s.mu.Lock()
	ss := s.sessions[c.Owner]
	if ss != nil {
		s.mu.Unlock()
		<-ss.ready
		return ss, ss.err
	}
	ss = &session{ready: make(chan struct{})}
	s.sessions[c.Owner] = ss
	s.mu.Unlock()
	ss.in, ss.plan, ss.err = s.start(c.Owner, c.Workspace, c.Narrowing)
	if ss.err != nil {
		s.mu.Lock()
		if s.sessions[c.Owner] == ss {
			delete(s.sessions, c.Owner)
		}
		s.mu.Unlock()
	}
	close(ss.ready)
	return ss, ss.err
}

// start starts owner's init: the sandbox resolved for workspace and
// narrowed by n, the owner's spill directory the only one its commands
// see.
func (s *spawner) start(owner, workspace string, n *shell.SandboxNarrowing) (*nsinit.Init, *sandbox.Plan, error) {
	o := s.init
	if n != nil && o.Sandbox == nil {
		return nil, nil, fmt.Errorf("contained: the session's sandbox: %w", local.ErrNoSandbox)
	}
	switch {
	case n != nil:
		plan, err := o.Sandbox.Narrowed(workspace, sandbox.Mode(n.Mode), n.NetworkOff, n.DenyRead)
		if err != nil {
			return nil, nil, fmt.Errorf("contained: the project's sandbox: %w", err)
		}
		o.Sandbox = plan
	case o.Sandbox != nil && workspace != "":
		plan, err := o.Sandbox.ForWorkspace(workspace)
		if err != nil {
			return nil, nil, fmt.Errorf("contained: the session's sandbox: %w", err)
		}
		o.Sandbox = plan
	}
	dir, err := s.ex.SpillDir(owner)
	if err != nil {
		return nil, nil, fmt.Errorf("contained: the session's spill directory: %w", err)
	}
	o.SpillDir = dir
	in, err := nsinit.Start(&o)
	if err != nil {
		return nil, nil, fmt.Errorf("contained: start the session's init: %w", err)
	}
	return in, o.Sandbox, nil
}

// plan is the sandbox of owner's init (the default one once the owner
// has ended).
func (s *spawner) plan(owner string) *sandbox.Plan {
	s.mu.Lock()
	ss := s.sessions[owner]
	s.mu.Unlock()
	if ss != nil {
		select {
		case <-ss.ready:
			if ss.err == nil {
				return ss.plan
			}
		default:
		}
	}
	return s.init.Sandbox
}

// Annotate implements local.Annotator: under a sandbox, every command
// gets the structured report and the markers of what the sandbox denied
// it and the processes it started, from the record the init's
// supervisor kept (nsinit.Child.Denials), whatever the command printed
// and however it exited (docs/sandbox.md#the-denial-record).
func (s *spawner) Annotate(c local.Command, ch local.Child, r *shell.Result) {
	plan := s.plan(c.Owner)
	if plan == nil {
		return
	}
	var (
		denied []sandbox.Denial
		more   int
	)
	if nc, ok := ch.(*nsinit.Child); ok {
		denied, more = nc.Denials()
	}
	r.Notes = append(r.Notes, sandbox.Markers(plan, denied, more)...)
	r.Sandbox = &shell.SandboxReport{Mode: string(plan.Mode), Network: string(plan.Network), Denied: []shell.SandboxDenial{}}
	for _, d := range denied {
		sd := shell.SandboxDenial{Path: d.Path, Op: d.Op}
		if !slices.Contains(r.Sandbox.Denied, sd) {
			r.Sandbox.Denied = append(r.Sandbox.Denied, sd)
		}
	}
}

// EndOwner implements local.Spawner: the owner's init ends, and the
// kernel kills everything in its namespace, whatever it did to escape
// its group or its parent.
func (s *spawner) EndOwner(owner string) {
	s.mu.Lock()
	ss := s.sessions[owner]
	delete(s.sessions, owner)
	s.mu.Unlock()
	if ss != nil {
		ss.close()
	}
}

// Close implements local.Spawner: every init ends, and the kernel kills
// everything in their namespaces.
func (s *spawner) Close() error {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = make(map[string]*session)
	s.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, ss := range sessions {
		wg.Go(func() {
			if err := ss.close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// close ends the session's init once its start is over.
func (ss *session) close() error {
	<-ss.ready
	if ss.in == nil {
		return nil
	}
	return ss.in.Close()
}

// Unenforced lists what of the sandbox given to New this host could not
// enforce, each with its cause (nsinit.Init.Unenforced of New's first
// init); nil when everything holds or ex was not made by New.
func Unenforced(ex *local.Executor) []string {
	if s, ok := ex.Options().Spawner.(*spawner); ok {
		return s.unenforced
	}
	return nil
}
