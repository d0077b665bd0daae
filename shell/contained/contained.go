//go:build linux

// Package contained is the provider of the shell seam that runs a
// session's commands inside a per-session init (internal/nsinit): their
// own user, PID and mount namespaces, where the kernel kills everything
// when the init ends. It is the local provider plus a spawner: output
// capture, timeouts, kills and results are the local provider's.
package contained

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/ops"
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
// New starts one init first, to learn what this host enforces (see
// Unenforced): when the host allows no user or PID namespaces the error
// is an *nsinit.UnavailableError naming the cause. New ends that init;
// NewWith can keep it for the owner expected first.
func New(opts *local.Options, initOpts *nsinit.Options) (*local.Executor, error) {
	return NewWith(opts, initOpts, nil)
}

// Options are the contained provider's own settings; nil is the
// defaults.
type Options struct {
	// FirstOwner, when set, is the owner expected to run the first
	// command (conch run's session): the init that New starts to learn
	// what the host enforces is started as that owner's init for the
	// default workspace (Request.Workspace "", the plan as given) and
	// kept for it, so that its first command pays no init start of its
	// own (docs/containment.md#in-conch). If the owner's first command asks
	// for another workspace or a narrowing, the kept init ends and the
	// command gets its own, as with New.
	FirstOwner string
	// Spare keeps one init started ahead for the next owner's first
	// command (a server's: conch serve, conch acp): the namespaces'
	// clone, the exec of the init's binary and its runtime's start, most
	// of an init's start, happen while no command waits, and the owner's
	// first command pays the rest (its sandbox, mounts and network). The
	// price is one idle process (docs/containment.md#spare-inits).
	Spare bool
}

// NewWith is New with the provider's own options co.
func NewWith(opts *local.Options, initOpts *nsinit.Options, co *Options) (*local.Executor, error) {
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
	o.Spawner, sp.rec = sp, o.Recorder
	ex, err := local.New(&o)
	if err != nil {
		return nil, fmt.Errorf("contained: %w", err)
	}
	sp.ex = ex
	if co != nil && co.Spare {
		// A server: each session's end readies its cache layer
		// directories for the next session's start.
		sp.init.Serving = true
		sp.spares.on, sp.spares.opts = true, sp.init
		if sp.spares.opts.Network, err = initNetwork(sp.init.Sandbox); err != nil {
			ex.Close()
			return nil, err
		}
	}
	if co != nil && co.FirstOwner != "" {
		// The first init is the owner's own: started as its first
		// command would start it, and kept in its place.
		b, err := sp.boundary(local.Command{Owner: co.FirstOwner})
		if err != nil {
			ex.Close()
			return nil, unwrapStart(err)
		}
		sp.unenforced, sp.cacheLayer = b.in.Unenforced(), b.in.CacheLayer()
		sp.mu.Lock()
		if ss := sp.sessions[co.FirstOwner]; ss != nil {
			ss.kept = true
		}
		sp.mu.Unlock()
		return ex, nil
	}
	probeOpts := sp.init
	if probeOpts.Network, err = initNetwork(probeOpts.Sandbox); err != nil {
		ex.Close()
		return nil, err
	}
	probe, err := nsinit.Start(&probeOpts)
	if err != nil {
		ex.Close()
		return nil, err
	}
	sp.unenforced, sp.cacheLayer = probe.Unenforced(), probe.CacheLayer()
	if err := probe.Close(); err != nil {
		ex.Close()
		return nil, fmt.Errorf("contained: end the first init: %w", err)
	}
	sp.spares.refill()
	return ex, nil
}

// unwrapStart is the error of a failed first init as New returns it:
// nsinit.Start's own (an *nsinit.UnavailableError when the host allows
// no namespaces), so that its cause reads first.
func unwrapStart(err error) error {
	if se, ok := errors.AsType[*startError](err); ok {
		return se.err
	}
	return err
}

// startError is the failure of nsinit.Start for a session.
type startError struct{ err error }

func (e *startError) Error() string { return "contained: start the session's init: " + e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// spawner spawns each command through its owner's init.
type spawner struct {
	init       nsinit.Options  // every init's; Sandbox for the default workspace
	ex         *local.Executor // for the owners' spill directories
	rec        ops.Recorder    // records each init's start (ops.Init)
	unenforced []string
	cacheLayer string

	mu       sync.Mutex
	sessions map[string]*session // by owner

	net network // the network policy's askers and command start times

	spares spares // the init started ahead for the next session, with Options.Spare
}

// spares keeps one init started ahead (nsinit.StartSpare) for the next
// owner's first init: its clone, exec and runtime start, most of an
// init's start, are then off that owner's first command
// (docs/containment.md#spare-inits).
type spares struct {
	on        bool
	opts      nsinit.Options // what the spares are started with
	mu        sync.Mutex
	spare     *nsinit.Spare
	refilling chan struct{} // while a refill runs; closed when it is over
	later     *time.Timer   // refillSoon's, until it fires or a refill starts
	closed    bool
}

// refillDelay bounds how long refillSoon waits for the command that
// took the spare: a spare's start (a clone, an exec, a runtime's start)
// run beside that command on two cores made it slower. Measured: a
// session's first command with the spare 37 ms with the refill at once,
// 21-24 ms with it after the command (BenchmarkSessionStart, load 1).
const refillDelay = time.Second

// refillSoon refills once a command of the session that took the spare
// has ended (the spawner's Annotate calls refill), or after refillDelay,
// whichever comes first.
func (p *spares) refillSoon() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.later != nil {
		return
	}
	p.later = time.AfterFunc(refillDelay, p.refill)
}

// take returns the spare, nil if there is none yet.
func (p *spares) take() *nsinit.Spare {
	if !p.on {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.spare
	p.spare = nil
	return sp
}

// refill starts a spare in the background, unless there is one or one
// is being started (a no-op when spares are off or closed).
func (p *spares) refill() {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.later != nil {
		p.later.Stop()
		p.later = nil
	}
	if p.closed || p.spare != nil || p.refilling != nil {
		return
	}
	done := make(chan struct{})
	p.refilling = done
	go func() {
		defer close(done)
		sp, err := nsinit.StartSpare(&p.opts)
		p.mu.Lock()
		p.refilling = nil
		if err == nil && !p.closed {
			p.spare, sp = sp, nil
		}
		p.mu.Unlock()
		if err == nil && sp != nil {
			sp.Close() // started while the executor closed
		}
	}()
}

// close ends the spare, and the one being started.
func (p *spares) close() {
	if !p.on {
		return
	}
	p.mu.Lock()
	p.closed = true
	if p.later != nil {
		p.later.Stop()
		p.later = nil
	}
	sp, refilling := p.spare, p.refilling
	p.spare = nil
	p.mu.Unlock()
	if refilling != nil {
		<-refilling
	}
	if sp != nil {
		sp.Close()
	}
}

// session is one owner's boundary: the workspace and narrowing of its
// first command, which every init of the owner's is built for, and its
// inits, one per set of directories the owner's user granted
// (Command.Grants): a grant needs a new init, since an init's sandbox
// cannot be widened, and the commands started before it keep running in
// theirs until the owner ends.
type session struct {
	workspace string
	narrowing *shell.SandboxNarrowing
	inits     map[string]*boundary // by grantsKey; the spawner's mu guards it
	// kept: the session was started by NewWith for Options.FirstOwner,
	// and its first command has not come yet.
	kept bool
}

// boundary is one init of a session. ready is closed once in and plan,
// or err, are set; they do not change after.
type boundary struct {
	ready chan struct{}
	in    *nsinit.Init
	plan  *sandbox.Plan   // nil without a sandbox
	eg    *egress.Session // nil unless the plan's network is filtered
	err   error
}

var (
	_ local.Spawner        = (*spawner)(nil)
	_ local.Annotator      = (*spawner)(nil)
	_ local.TerminalOpener = (*spawner)(nil)
)

// OpenTerminal implements local.TerminalOpener: the terminal is opened
// by the init of c's owner for its grants (started first if there is
// none), in that init's own devpts instance.
func (s *spawner) OpenTerminal(c local.Command) (master, tty *os.File, err error) {
	b, err := s.boundary(c)
	if err != nil {
		return nil, nil, err
	}
	return b.in.OpenPTY()
}

// grantsKey names a set of granted directories (in the order they were
// granted: a session's grants only grow).
func grantsKey(grants []string) string { return strings.Join(grants, "\x00") }

// Spawn implements local.Spawner: the command runs in its owner's init
// for its grants, started first if the owner has none.
func (s *spawner) Spawn(c local.Command) (local.Child, error) {
	b, err := s.boundary(c)
	if err != nil {
		return nil, err
	}
	return b.in.Spawn(c.Command)
}

// boundary returns the init of c's owner for c's grants, starting it if
// there is none: the owner's first command starts its first init (with
// its workspace and narrowing, kept for the owner's later inits), the
// first command with new grants a wider one, and commands arriving
// meanwhile wait for it. A start that failed is forgotten, so that the
// owner's next command tries again.
func (s *spawner) boundary(c local.Command) (*boundary, error) {
	s.mu.Lock()
	ss := s.sessions[c.Owner]
	var stale []*boundary
	if ss != nil && ss.kept {
		// The first command of the owner whose init NewWith kept: it is
		// this command's only if the command wants the boundary it was
		// built for.
		ss.kept = false
		if c.Narrowing != nil || (c.Workspace != "" && s.init.Sandbox != nil && s.init.Sandbox.Mode != sandbox.FullAccess) {
			stale = slices.Collect(maps.Values(ss.inits))
			ss = nil
		}
	}
	if ss == nil {
		ss = &session{workspace: c.Workspace, narrowing: c.Narrowing, inits: make(map[string]*boundary)}
		s.sessions[c.Owner] = ss
	}
	key := grantsKey(c.Grants)
	b := ss.inits[key]
	if b != nil {
		s.mu.Unlock()
		<-b.ready
		return b, b.err
	}
	b = &boundary{ready: make(chan struct{})}
	ss.inits[key] = b
	s.mu.Unlock()
	closeAll(stale)
	b.in, b.plan, b.eg, b.err = s.start(c.Owner, ss.workspace, ss.narrowing, c.Grants)
	if b.err != nil {
		s.mu.Lock()
		if ss.inits[key] == b {
			delete(ss.inits, key)
		}
		if len(ss.inits) == 0 && s.sessions[c.Owner] == ss {
			delete(s.sessions, c.Owner)
		}
		s.mu.Unlock()
	}
	close(b.ready)
	return b, b.err
}

// start starts an init of owner's: the sandbox resolved for workspace,
// narrowed by n and widened by grants, the owner's spill directory the
// only one its commands see, and the egress of its network when the
// plan filters it.
func (s *spawner) start(owner, workspace string, n *shell.SandboxNarrowing, grants []string) (in *nsinit.Init, plan *sandbox.Plan, eg *egress.Session, err error) {
	if rec := s.rec; rec != nil {
		began := time.Now()
		defer func() {
			e := ops.Init{Owner: owner, Result: "ok", Duration: time.Since(began)}
			if err != nil {
				e.Result = "failed"
			}
			rec.Record(context.Background(), e)
		}()
	}
	return s.startInit(owner, workspace, n, grants)
}

// startInit is start without its record.
func (s *spawner) startInit(owner, workspace string, n *shell.SandboxNarrowing, grants []string) (*nsinit.Init, *sandbox.Plan, *egress.Session, error) {
	o := s.init
	if n != nil && o.Sandbox == nil {
		return nil, nil, nil, fmt.Errorf("contained: the session's sandbox: %w", local.ErrNoSandbox)
	}
	switch {
	case n != nil:
		plan, err := o.Sandbox.Narrowed(workspace, sandbox.Mode(n.Mode), n.NetworkOff, n.DenyRead)
		if err == nil {
			plan, err = narrowNetwork(plan, n)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("contained: the project's sandbox: %w", err)
		}
		o.Sandbox = plan
	case o.Sandbox != nil && workspace != "":
		plan, err := o.Sandbox.ForWorkspace(workspace)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("contained: the session's sandbox: %w", err)
		}
		o.Sandbox = plan
	}
	if o.Sandbox != nil && len(grants) > 0 {
		plan, err := o.Sandbox.Granted(grants)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("contained: the session's granted directories: %w", err)
		}
		o.Sandbox = plan
	}
	dir, err := s.ex.SpillDir(owner)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("contained: the session's spill directory: %w", err)
	}
	o.SpillDir, o.SpillRoot = dir, s.ex.SpillRoot()
	if o.Network, err = initNetwork(o.Sandbox); err != nil {
		return nil, nil, nil, err
	}
	prepared := s.prepareEgress(owner, o.Sandbox)
	o.Spare = s.spares.take()
	in, err := nsinit.Start(&o)
	s.spares.refillSoon()
	if err != nil {
		if eg, _ := prepared(); eg != nil {
			eg.Close()
		}
		return nil, nil, nil, &startError{err}
	}
	eg, err := startEgress(in, prepared)
	if err != nil {
		in.Close()
		return nil, nil, nil, fmt.Errorf("contained: the session's network: %w", err)
	}
	return in, o.Sandbox, eg, nil
}

// plan is the sandbox of the init that runs c's commands (the default
// one once the owner has ended), and its egress (nil once the owner has
// ended).
func (s *spawner) plan(c local.Command) (*sandbox.Plan, *egress.Session) {
	s.mu.Lock()
	var b *boundary
	if ss := s.sessions[c.Owner]; ss != nil {
		b = ss.inits[grantsKey(c.Grants)]
	}
	s.mu.Unlock()
	if b != nil {
		select {
		case <-b.ready:
			if b.err == nil {
				return b.plan, b.eg
			}
		default:
		}
	}
	return s.init.Sandbox, nil
}

// Annotate implements local.Annotator: under a sandbox, every command
// gets the structured report and the markers of what the sandbox denied
// it and the processes it started, from the record the init's
// supervisor kept (nsinit.Child.Denials), whatever the command printed
// and however it exited (docs/sandbox.md#the-denial-record), and those
// of the connections its network policy refused (annotateNetwork).
func (s *spawner) Annotate(c local.Command, ch local.Child, r *shell.Result) {
	s.spares.refill() // a command ended: the next spare's start competes with none of its
	plan, eg := s.plan(c)
	if plan == nil {
		return
	}
	defer s.annotateNetwork(c, eg, r)
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

// EndOwner implements local.Spawner: the owner's inits end, and the
// kernel kills everything in their namespaces, whatever it did to
// escape its group or its parent.
func (s *spawner) EndOwner(owner string) {
	s.mu.Lock()
	var inits []*boundary
	if ss := s.sessions[owner]; ss != nil {
		inits = slices.Collect(maps.Values(ss.inits))
	}
	delete(s.sessions, owner)
	s.mu.Unlock()
	closeAll(inits)
}

// Close implements local.Spawner: every init ends, and the kernel kills
// everything in their namespaces.
func (s *spawner) Close() error {
	s.mu.Lock()
	var inits []*boundary
	for _, ss := range s.sessions {
		inits = append(inits, slices.Collect(maps.Values(ss.inits))...)
	}
	s.sessions = make(map[string]*session)
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(s.spares.close)
	err := closeAll(inits)
	wg.Wait()
	return err
}

// closeAll ends the inits, concurrently, each once its start is over.
func closeAll(inits []*boundary) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, b := range inits {
		wg.Go(func() {
			<-b.ready
			if b.in == nil {
				return
			}
			// The init's close (its namespace torn down) and the
			// network stack's (its dispatcher ends when the device
			// does) each wait for the kernel: side by side, the close
			// costs the longer of the two, not their sum.
			if b.eg != nil {
				wg.Go(func() { b.eg.Close() })
			}
			if err := b.in.Close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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

// CacheLayer says how the inits of ex give their commands the cache layer
// of the sandbox given to New (nsinit.Init.CacheLayer of New's first
// init): "overlay", "copy (overlayfs: <why>)", or "" (none).
func CacheLayer(ex *local.Executor) string {
	if s, ok := ex.Options().Spawner.(*spawner); ok {
		return s.cacheLayer
	}
	return ""
}
