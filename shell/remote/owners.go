package remote

import (
	"context"
	"errors"
	"sync"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/shell"
)

// Instance is what a template host makes for one owner: a container or
// a pod whose agent the owner's commands run in.
type Instance interface {
	// Executor reaches the agent in the instance.
	Executor() *Executor
	// Name names the instance (a container's name, a pod's
	// namespace/name).
	Name() string
	// Running reports whether the instance is still there; one whose
	// engine or API server cannot say is taken to be.
	Running() bool
	// Remove removes the instance, killing what runs in it, and returns
	// once it is gone; its executor is closed first. An instance already
	// gone is no error.
	Remove() error
}

// Owners is the executor of a template host: each owner
// (shell.Request.Owner, a session) gets an Instance of its own, made by
// start on the owner's first command and removed when the owner ends
// (EndOwner) or Owners is closed. The container templates
// (shell/remote/container) and the Kubernetes pod templates
// (shell/remote/kube) are Owners over their own start.
//
// Owners implements shell.Executor, shell.ContextLauncher,
// shell.OwnerEnder and shell.Terminals; it is safe for concurrent use.
type Owners struct {
	host   string
	limits shell.Limits
	start  func(context.Context) (Instance, error)

	// closing ends, when Close begins, the starts under way.
	closing context.Context
	stop    context.CancelCauseFunc

	mu       sync.Mutex
	sessions map[string]*ownerSession
	closed   bool
}

// ownerSession is one owner's instance.
type ownerSession struct {
	ready  chan struct{} // closed once started, or once the start failed
	cancel context.CancelCauseFunc
	err    error // why it did not start
	inst   Instance
}

var (
	_ shell.Executor        = (*Owners)(nil)
	_ shell.ContextLauncher = (*Owners)(nil)
	_ shell.OwnerEnder      = (*Owners)(nil)
	_ shell.Terminals       = (*Owners)(nil)
)

// errOwnerEnded ends the start of the instance of an owner that ended.
var errOwnerEnded = errors.New("the session ended")

// NewOwners returns the executor of the template host called host, whose
// requests limits resolves and whose owners' instances start makes.
// start's context ends with the command that asked for the instance, with
// its owner (EndOwner) and with Close; its errors are the host's
// unreachable errors' causes.
func NewOwners(host string, limits shell.Limits, start func(context.Context) (Instance, error)) *Owners {
	closing, stop := context.WithCancelCause(context.Background())
	return &Owners{host: host, limits: limits, start: start, closing: closing, stop: stop, sessions: map[string]*ownerSession{}}
}

// Resolve implements shell.Executor as every remote executor does; it
// starts nothing.
func (o *Owners) Resolve(r shell.Request) (shell.Spec, error) { return o.limits.Resolve(r) }

// Launch implements shell.Executor.
func (o *Owners) Launch(s shell.Spec) (shell.Process, error) {
	return o.LaunchContext(context.Background(), s)
}

// LaunchContext implements shell.ContextLauncher: ctx bounds making the
// owner's instance and the dial, and a start that ctx ended is an abort
// before spawn.
func (o *Owners) LaunchContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return o.startIn(ctx, s, (*Executor).LaunchContext)
}

// Start implements shell.Executor.
func (o *Owners) Start(s shell.Spec) (shell.Process, error) {
	return o.StartContext(context.Background(), s)
}

// StartContext implements shell.ContextLauncher as LaunchContext does,
// for a command that runs in the background.
func (o *Owners) StartContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return o.startIn(ctx, s, (*Executor).StartContext)
}

// startIn starts s with start in the executor of its owner's instance,
// making the instance first if needed, within ctx.
func (o *Owners) startIn(ctx context.Context, s shell.Spec, start func(*Executor, context.Context, shell.Spec) (shell.Process, error)) (shell.Process, error) {
	if ctx.Err() != nil {
		return nil, shell.AbortedBeforeSpawn(context.Cause(ctx))
	}
	var p shell.Process
	err := o.with(ctx, s.Owner, func(ex *Executor) (err error) {
		p, err = start(ex, ctx, s)
		return err
	})
	if err != nil && ctx.Err() != nil {
		return nil, shell.AbortedBeforeSpawn(context.Cause(ctx))
	}
	return p, err
}

// StartTerminal implements shell.Terminals.
func (o *Owners) StartTerminal(s shell.Spec) (shell.Terminal, error) {
	var tm shell.Terminal
	err := o.with(context.Background(), s.Owner, func(ex *Executor) (err error) {
		tm, err = ex.StartTerminal(s)
		return err
	})
	return tm, err
}

// Hello makes the instance of the owner "" (removed by Close) when it has
// none, and returns what its agent said of itself: what a command gets in
// an instance of this template.
func (o *Owners) Hello(ctx context.Context) (agent.Hello, error) {
	var h agent.Hello
	err := o.with(ctx, "", func(ex *Executor) (err error) {
		h, err = ex.Hello(ctx)
		return err
	})
	return h, err
}

// with calls f with the executor of owner's instance, making the
// instance when owner has none. When f finds the host unreachable because
// the instance is gone (removed behind conch's back), the owner gets a
// new instance and f is called once more.
func (o *Owners) with(ctx context.Context, owner string, f func(*Executor) error) error {
	for try := 0; ; try++ {
		s, err := o.session(ctx, owner)
		if err != nil {
			return err
		}
		err = f(s.inst.Executor())
		var ue *UnreachableError
		if try > 0 || !errors.As(err, &ue) || ctx.Err() != nil || s.inst.Running() {
			return err
		}
		o.mu.Lock()
		if o.sessions[owner] == s {
			delete(o.sessions, owner)
		}
		o.mu.Unlock()
		o.end(s)
	}
}

// Instances are the names of the owners' instances now.
func (o *Owners) Instances() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var names []string
	for _, s := range o.sessions {
		select {
		case <-s.ready:
			if s.err == nil {
				names = append(names, s.inst.Name())
			}
		default:
		}
	}
	return names
}

// EndOwner implements shell.OwnerEnder: the owner's agent kills
// everything it started and exits, and its instance is removed; it
// returns once the instance is gone. An instance still being made is
// given up at once. An owner that has none has nothing to end.
func (o *Owners) EndOwner(owner string) {
	o.mu.Lock()
	s := o.sessions[owner]
	delete(o.sessions, owner)
	o.mu.Unlock()
	if s != nil {
		s.cancel(errOwnerEnded)
		o.end(s)
	}
}

// Close implements shell.Executor: the instances being made are given
// up, and every owner's instance is ended as by EndOwner, in parallel.
func (o *Owners) Close() error {
	o.mu.Lock()
	o.closed = true
	sessions := o.sessions
	o.sessions = map[string]*ownerSession{}
	o.mu.Unlock()
	o.stop(shell.ErrClosed)
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	for _, s := range sessions {
		wg.Go(func() { errs <- o.end(s) })
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// end closes s's executor and removes its instance, once its start
// ended.
func (o *Owners) end(s *ownerSession) error {
	<-s.ready
	if s.err != nil {
		return nil
	}
	err := s.inst.Executor().Close()
	if rerr := s.inst.Remove(); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// session returns owner's instance, making it when owner has none.
// Callers for an owner whose instance is being made wait for it; a start
// that failed is tried again by the next call. Its errors are
// *UnreachableError.
func (o *Owners) session(ctx context.Context, owner string) (*ownerSession, error) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, shell.ErrClosed
	}
	s, ok := o.sessions[owner]
	if !ok {
		// The start ends with ctx, with the owner (EndOwner) and with
		// Close, whichever ends first.
		sctx, cancel := context.WithCancelCause(ctx)
		s = &ownerSession{ready: make(chan struct{}), cancel: cancel}
		o.sessions[owner] = s
		o.mu.Unlock()
		stop := context.AfterFunc(o.closing, func() { cancel(context.Cause(o.closing)) })
		s.inst, s.err = o.start(sctx)
		stop()
		cancel(nil)
		if s.err != nil {
			o.mu.Lock()
			if o.sessions[owner] == s {
				delete(o.sessions, owner)
			}
			o.mu.Unlock()
		}
		close(s.ready)
	} else {
		o.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, &UnreachableError{Host: o.host, Err: context.Cause(ctx)}
		}
	}
	if s.err != nil {
		return nil, &UnreachableError{Host: o.host, Err: s.err}
	}
	return s, nil
}
