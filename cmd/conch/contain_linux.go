//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// executor builds the executor of the stack with o, and says what it
// enforces. With containment on (or a sandbox that restricts, which only
// an init enforces) it is the contained provider: each session's commands
// run in an init of their own (docs/containment.md).
//
// What the host cannot give is refused or degraded (docs/containment.md,
// docs/sandbox.md): --containment require, a sandbox the user chose
// (sandboxGiven), and --max-pids or --max-memory refuse to start naming
// the cause. The defaults degrade: --containment auto on a host that
// allows no init gets the plain local provider, and the default sandbox
// runs with what the host allows; each cause is logged once, and a
// missing file sandbox makes the enforcement degraded (the bash
// description says so). An explicit --containment off turns the default
// sandbox off with the init it needs.
func (c *config) executor(o *local.Options, log *slog.Logger) (_ shell.Executor, _ enforcement, err error) {
	if err := c.applyProvider(); err != nil {
		return nil, enforcement{}, err
	}
	pol, restricts, err := c.sandboxPolicy()
	if err != nil {
		return nil, enforcement{}, err
	}
	netLine, netNote, warn, err := c.checkNetwork(&pol)
	if err != nil {
		return nil, enforcement{}, err
	}
	defer func() {
		if err == nil && log != nil {
			warn(log)
		}
	}()
	restricts = pol.Mode != sandbox.FullAccess || pol.Network != sandbox.NetworkOn
	given := restricts && c.sandboxGiven()
	mode := c.containment.v
	limited := c.maxPids.v > 0 || c.maxMemory.v > 0 // only an init's cgroups enforce them
	if need := c.needsInit(given); need != "" && mode == "off" && c.containment.given {
		off := "--containment off"
		if c.provider.v == "local" {
			off = "--provider local"
		}
		return nil, enforcement{}, fmt.Errorf("%s runs commands without an init, which %s needs", off, need)
	}
	switch {
	case given || limited:
		mode = "require"
	case mode == "off":
		restricts = false
	}
	if mode == "off" {
		return localProvider(o, enforcement{containment: "none (off)", sandbox: "none (off)", project: noSandbox("containment off"),
			network: "on (containment off)", netNote: networkOnNote})
	}
	// The init is this binary (see nsinit.go); a crash of it is
	// written where conch logs.
	initOpts := nsinit.Options{
		Args: []string{nsinit.HelperArg}, Stderr: os.Stderr,
		MaxPids: int64(c.maxPids.v), MaxMemory: int64(c.maxMemory.v),
	}
	if restricts {
		if initOpts.Sandbox, err = pol.Resolve(); err != nil {
			return nil, enforcement{}, err
		}
	}
	// Whether the namespaces work is learnt by starting the init itself
	// (contained.NewWith): a probe of its own would cost a spawn of each.
	probe := nsinit.Report{Cgroup: nsinit.ProbeCgroup()}
	if probe.Cgroup.Writable {
		initOpts.Cgroup = probe.Cgroup.Dir
	}
	ex, err := contained.NewWith(o, &initOpts, &contained.Options{FirstOwner: c.firstOwner, Spare: c.spareInits})
	if err != nil {
		err = withContainerHint(err)
		if mode == "require" {
			return nil, enforcement{}, fmt.Errorf("containment unavailable: %w", err)
		}
		cause := err.Error()
		enf := enforcement{containment: "none (" + cause + ")", sandbox: "none (off)", project: noSandbox("containment unavailable: " + cause),
			network: "on (containment unavailable: " + cause + ")", netNote: networkOnNote}
		if pol.Network != sandbox.NetworkOn {
			enf.netNote = fmt.Sprintf(networkDegradedFmt, pol.Network, "no containment")
		}
		if log != nil {
			log.Warn("containment unavailable: commands run without it", "cause", cause)
		}
		if restricts {
			enf.sandbox, enf.degraded = "none ("+string(pol.Mode)+" unavailable: "+cause+")", true
			if log != nil {
				log.Warn("sandbox unavailable: commands run without a file sandbox", "mode", pol.Mode, "cause", cause)
			}
		}
		return localProvider(o, enf)
	}
	enf := enforcement{containment: probe.Summary(), sandbox: "none (off)", project: noSandbox("the sandbox is off: full-access, network on"),
		network: netLine, netNote: netNote}
	enf.cacheLayer = "none (" + noCacheLayer(initOpts.Sandbox) + ")"
	switch how := contained.CacheLayer(ex); {
	case strings.HasPrefix(how, "none ("):
		enf.cacheLayer = how
	case how != "":
		enf.cacheLayer = how + " in " + initOpts.Sandbox.CacheLayer
	}
	if restricts {
		enf.sandbox = fmt.Sprintf("%s, network %s", initOpts.Sandbox.Mode, initOpts.Sandbox.Network)
		enf.project = tools.Sandbox{Mode: string(initOpts.Sandbox.Mode), Network: string(initOpts.Sandbox.Network),
			Enforced: true, Writable: describedWritable(pol)}
	}
	if un := contained.Unenforced(ex); len(un) > 0 {
		missing := strings.Join(un, ", ")
		if given {
			ex.Close()
			return nil, enforcement{}, fmt.Errorf("sandbox %s: this host cannot enforce %s", pol.Mode, missing)
		}
		enf.sandbox += " (not enforced: " + missing + ")"
		// A project's stricter sandbox may be the part this host lacks.
		enf.project = noSandbox("this host cannot enforce " + missing)
		enf.degraded = slices.ContainsFunc(un, func(u string) bool { return strings.HasPrefix(u, sandbox.UnenforcedFiles) })
		if log != nil {
			log.Warn("sandbox partly unavailable: commands run with what the host allows", "mode", pol.Mode, "missing", missing)
		}
	}
	if restricts {
		enf.unsandboxed = c.unsandboxed(o, initOpts)
	}
	enf.provider, enf.scrubbed, enf.cwd = "contained", ex.Scrubbed(), ex.Options().Cwd
	return ex, enf, nil
}

// needsInit names the first setting given that only an init enforces
// (given: a sandbox that restricts was given), or "".
func (c *config) needsInit(given bool) string {
	switch {
	case given && c.sandboxMode.given && c.sandboxMode.v != string(sandbox.FullAccess):
		return "--sandbox " + c.sandboxMode.v
	case given:
		return "--network " + c.network.v
	case c.maxPids.v > 0:
		return "--max-pids " + c.maxPids.String()
	case c.maxMemory.v > 0:
		return "--max-memory " + c.maxMemory.String()
	}
	return ""
}

// describedWritable are the directories the bash description names as
// writable besides the session's workspace: the temp dirs, and under
// workspace-write the caches (through conch's cache layer, when there is
// one) and the configured writable roots.
func describedWritable(pol sandbox.Policy) []string {
	dirs := slices.Clone(pol.TempDirs)
	if pol.Mode != sandbox.ReadOnly {
		if pol.CacheLayer != "" {
			dirs = append(dirs, pol.Caches...)
		}
		dirs = append(dirs, pol.WritableRoots...)
	}
	var out []string
	for _, d := range dirs {
		if d = filepath.Clean(d); d != "." && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// unsandboxed is the executor of the commands a user lets out of the
// sandbox (docs/sandbox.md#escalation): an init like initOpts's, with no
// sandbox, started at the first yes (see lazyExecutor); nil with
// sandbox.escalation never.
func (c *config) unsandboxed(o *local.Options, initOpts nsinit.Options) shell.Executor {
	if c.escalation.v != "ask" {
		return nil
	}
	initOpts.Sandbox = &sandbox.Plan{Mode: sandbox.FullAccess, Network: sandbox.NetworkOn}
	// No warm shell: each of its commands is a yes of the user's, once,
	// and none would wait for the next out of the sandbox.
	uo := *o
	uo.Warm = false
	o = &uo
	// The init that learns what the host enforces is the first yes's
	// owner's, kept for its command: one init start, not two.
	return &lazyExecutor{start: func(owner string) (shell.Executor, error) {
		return contained.NewWith(o, &initOpts, &contained.Options{FirstOwner: owner})
	}}
}

// lazyExecutor runs the commands a user let out of the sandbox
// (docs/sandbox.md, escalation). The sandbox's mounts and network
// namespace belong to an init, and Landlock and seccomp restrict the
// init itself, irreversibly, so a command cannot leave the sandbox of the
// init that spawns it: these commands get an init of their own, with the
// same containment and no sandbox (full-access), started when a user
// first says yes, so that a deployment where no one does pays nothing.
// A start that fails is tried again at the next yes.
type lazyExecutor struct {
	start func(firstOwner string) (shell.Executor, error)

	mu     sync.Mutex
	ex     shell.Executor
	closed bool
}

var _ shell.OwnerEnder = (*lazyExecutor)(nil)

// get returns the executor, started for owner's first command if it was
// not yet.
func (l *lazyExecutor) get(owner string) (shell.Executor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, shell.ErrClosed
	}
	if l.ex == nil {
		ex, err := l.start(owner)
		if err != nil {
			return nil, fmt.Errorf("start the init of commands outside the sandbox: %w", err)
		}
		l.ex = ex
	}
	return l.ex, nil
}

// started is the executor if it was started, else nil.
func (l *lazyExecutor) started() shell.Executor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ex
}

func (l *lazyExecutor) Resolve(r shell.Request) (shell.Spec, error) {
	ex, err := l.get(r.Owner)
	if err != nil {
		return shell.Spec{}, err
	}
	return ex.Resolve(r)
}

func (l *lazyExecutor) Launch(s shell.Spec) (shell.Process, error) {
	ex, err := l.get(s.Owner)
	if err != nil {
		return nil, err
	}
	return ex.Launch(s)
}

func (l *lazyExecutor) Start(s shell.Spec) (shell.Process, error) {
	ex, err := l.get(s.Owner)
	if err != nil {
		return nil, err
	}
	return ex.Start(s)
}

// EndOwner ends what the owner's escalated commands left running; before
// the first yes there is nothing.
func (l *lazyExecutor) EndOwner(owner string) {
	if ex, ok := l.started().(shell.OwnerEnder); ok {
		ex.EndOwner(owner)
	}
}

// Close ends the init, if it was started, and refuses later starts.
func (l *lazyExecutor) Close() error {
	l.mu.Lock()
	l.closed = true
	ex := l.ex
	l.mu.Unlock()
	if ex == nil {
		return nil
	}
	return ex.Close()
}

// noCacheLayer says why commands under plan have no cache layer.
func noCacheLayer(plan *sandbox.Plan) string {
	switch {
	case plan == nil || plan.Mode == sandbox.FullAccess:
		return "full-access: commands write the user's caches"
	case plan.Mode == sandbox.ReadOnly:
		return "read-only: the user's caches are read-only"
	}
	return "no cache directory"
}
