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
	"sync"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// New starts an init with initOpts (nil: conch's own binary, which
// serves it as `conch __init`) and returns a local executor of opts whose
// commands it spawns. Closing the executor ends the init. When the host
// allows no user or PID namespaces the error is an
// *nsinit.UnavailableError naming the cause.
func New(opts *local.Options, initOpts *nsinit.Options) (*local.Executor, error) {
	var o local.Options
	if opts != nil {
		o = *opts
	}
	if o.Spawner != nil {
		return nil, errors.New("contained: Options.Spawner is the init's")
	}
	in, err := nsinit.Start(initOpts)
	if err != nil {
		return nil, err
	}
	sp := &spawner{in: in, owned: make(map[string][]*nsinit.Child)}
	if initOpts != nil {
		sp.plan = initOpts.Sandbox
	}
	o.Spawner = sp
	ex, err := local.New(&o)
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("contained: %w", err)
	}
	return ex, nil
}

// spawner spawns each command through the init and remembers, per owner,
// the commands whose leftovers EndOwner must take.
type spawner struct {
	in   *nsinit.Init
	plan *sandbox.Plan // nil without a sandbox

	mu    sync.Mutex
	owned map[string][]*nsinit.Child
}

var (
	_ local.Spawner   = (*spawner)(nil)
	_ local.Annotator = (*spawner)(nil)
)

// Spawn implements local.Spawner.
func (s *spawner) Spawn(c local.Command) (local.Child, error) {
	ch, err := s.in.Spawn(nsinit.Command{
		Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir,
		Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, Terminal: c.Terminal,
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.owned[c.Owner] = append(s.owned[c.Owner], ch)
	s.mu.Unlock()
	return ch, nil
}

// Annotate implements local.Annotator: under a sandbox, a command that
// exited non-zero gets the markers of what the sandbox denied it
// (sandbox.Attribute on its stderr), and every command the structured
// report.
func (s *spawner) Annotate(c local.Command, r *shell.Result) {
	if s.plan == nil {
		return
	}
	code := 0 // a signal's end is not attributed
	if r.ExitCode != nil {
		code = *r.ExitCode
	}
	f := sandbox.Failure{Stderr: r.Stderr.Text, ExitCode: code, Workdir: c.Dir}
	if len(c.Args) > 0 {
		f.Command = c.Args[len(c.Args)-1] // bash -c's line
	}
	markers, rep := sandbox.Attribute(s.plan, f, sandbox.OSHost{})
	r.Notes = append(r.Notes, markers...)
	r.Sandbox = &shell.SandboxReport{Mode: string(rep.Mode), Network: string(rep.Network), Denied: []shell.SandboxDenial{}}
	for _, d := range rep.Denied {
		r.Sandbox.Denied = append(r.Sandbox.Denied, shell.SandboxDenial{Path: d.Path, Op: d.Op})
	}
}

// EndOwner implements local.Spawner: the init kills what each of the
// owner's commands left running (it charges leftovers to the command
// that started them, even after its shell was released).
func (s *spawner) EndOwner(owner string) {
	s.mu.Lock()
	chs := s.owned[owner]
	delete(s.owned, owner)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, ch := range chs {
		wg.Go(func() { ch.KillLeftovers() })
	}
	wg.Wait()
}

// Close implements local.Spawner: the init ends, and the kernel kills
// everything in its namespace.
func (s *spawner) Close() error { return s.in.Close() }

// Unenforced lists what of the sandbox given to New the init of ex could
// not enforce on this host, each with its cause (nsinit.Init.Unenforced);
// nil when everything holds or ex was not made by New.
func Unenforced(ex *local.Executor) []string {
	if s, ok := ex.Options().Spawner.(*spawner); ok {
		return s.in.Unenforced()
	}
	return nil
}
