package shell

import (
	"context"
	"fmt"
	"path"
	"time"
)

// Limits are a provider's defaults and bounds: what Resolve fills in and
// clamps to. A provider embeds Limits (or keeps one) and implements its
// Executor.Resolve as Limits.Resolve, so that every provider refuses and
// clamps a request the same way.
type Limits struct {
	// Cwd is the default workdir, an absolute path of the executor's
	// host, and the base a relative workdir is joined to. "" leaves both
	// to the host (a remote provider whose agent resolves them against
	// its own directory).
	Cwd string
	// Timeout is the foreground timeout of a request that gives none;
	// MaxTimeout bounds every foreground timeout (a larger one is
	// clamped silently). Both must be positive.
	Timeout, MaxTimeout time.Duration
	// MaxStdoutBytes is the largest Request.StdoutMaxBytes accepted; a
	// larger one is refused. 0 means no bound here (the host checks).
	MaxStdoutBytes int
	// HomeRelative keeps a workdir of "~" or "~/…" as given, for the host
	// to expand to its user's home, instead of joining it to Cwd.
	HomeRelative bool
}

// Resolve fills l's defaults into r, clamps its timeout to l.MaxTimeout
// and refuses bad input with a *RequestError naming the field: a blank
// command (only ASCII white space), a negative timeout, a negative stdout
// cap or one above l.MaxStdoutBytes. It cleans the workdir and joins a
// relative one to l.Cwd (paths of the host are slash-separated). It does
// not look at any file system: a missing workdir is reported when the
// Spec is run or started. Optional fields the caller did not give stay
// absent in the Spec.
func (l Limits) Resolve(r Request) (Spec, error) {
	if isBlank(r.Command) {
		return Spec{}, &RequestError{Field: "Command", Reason: "must be a non-empty string"}
	}
	if r.Timeout < 0 {
		return Spec{}, &RequestError{Field: "Timeout", Reason: "must be a positive finite number"}
	}
	if r.StdoutMaxBytes < 0 {
		return Spec{}, &RequestError{Field: "StdoutMaxBytes", Reason: "must be a positive finite number"}
	}
	if l.MaxStdoutBytes > 0 && r.StdoutMaxBytes > l.MaxStdoutBytes {
		return Spec{}, &RequestError{Field: "StdoutMaxBytes", Reason: fmt.Sprintf("must be at most %d", l.MaxStdoutBytes)}
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = l.Timeout
	}
	wd := r.Workdir
	if l.Cwd != "" && !(l.HomeRelative && IsHomeRelative(wd)) {
		switch {
		case wd == "":
			wd = l.Cwd
		case !path.IsAbs(wd):
			wd = path.Join(l.Cwd, wd)
		}
	}
	if wd != "" {
		wd = path.Clean(wd)
	}
	ws := r.Workspace
	if ws != "" {
		ws = path.Clean(ws)
	}
	return Spec{
		Command:        r.Command,
		Workdir:        wd,
		Timeout:        min(timeout, l.MaxTimeout),
		StdoutMaxBytes: r.StdoutMaxBytes,
		Stdin:          r.Stdin,
		Env:            r.Env,
		ManagedEnv:     r.ManagedEnv,
		Owner:          r.Owner,
		Workspace:      ws,
		Narrowing:      r.Narrowing,
		Grants:         r.Grants,
	}, nil
}

// IsHomeRelative reports whether workdir is "~" or "~/…": a path in the
// home directory of the user the host runs commands as.
func IsHomeRelative(workdir string) bool {
	return workdir == "~" || len(workdir) > 1 && workdir[:2] == "~/"
}

func isBlank(s string) bool {
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}

// Run runs s in the foreground on ex and waits for it, its timeout, or
// ctx: it is ex.Launch, a Kill when ctx is done first (the Result says
// Aborted), and the Result once the process is Done. It returns an error
// only when nothing ran: ErrAbortedBeforeSpawn when ctx was done before
// the launch, else the error of Launch (*WorkdirError, *SpawnError,
// ErrClosed, or a provider's own; with a ContextLauncher, ctx also bounds
// the launch). A non-zero exit, a timeout kill, a
// cancellation kill and a command that signals itself are a Result and a
// nil error.
func Run(ctx context.Context, ex Executor, s Spec) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, AbortedBeforeSpawn(context.Cause(ctx))
	}
	p, err := Launch(ctx, ex, s)
	if err != nil {
		return Result{}, err
	}
	stop := context.AfterFunc(ctx, func() { p.Kill() })
	<-p.Done()
	stop()
	return p.Result(), nil
}

// ContextLauncher is implemented by executors whose Launch and Start may
// wait before anything is spawned (a remote provider dials its host
// first). LaunchContext and StartContext are Launch and Start with ctx
// bounding that wait: when ctx ends it, nothing was spawned and the error
// wraps ErrAbortedBeforeSpawn. ctx bounds the start only: the process
// outlives it. Callers use the functions Launch and Start, which take
// these forms when the executor has them.
type ContextLauncher interface {
	LaunchContext(ctx context.Context, s Spec) (Process, error)
	StartContext(ctx context.Context, s Spec) (Process, error)
}

// Launch is ex.Launch with ctx bounding the wait before the spawn, when ex
// is a ContextLauncher (docs/architecture.md#one-bash-call).
func Launch(ctx context.Context, ex Executor, s Spec) (Process, error) {
	if cl, ok := ex.(ContextLauncher); ok {
		return cl.LaunchContext(ctx, s)
	}
	return ex.Launch(s)
}

// Start is ex.Start with ctx bounding the wait before the spawn, when ex
// is a ContextLauncher: a background start to an unreachable host
// returns when ctx ends, not when the dial's timeout does.
func Start(ctx context.Context, ex Executor, s Spec) (Process, error) {
	if cl, ok := ex.(ContextLauncher); ok {
		return cl.StartContext(ctx, s)
	}
	return ex.Start(s)
}
