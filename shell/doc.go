// Package shell is conch's executor seam: the one interface through which
// everything above it (the task runtime, the model-facing tools, the MCP
// and ACP transports) runs a bash command, whatever runs it underneath
// (local processes in shell/local, the per-session init with its
// sandbox in shell/contained, remote hosts in shell/remote).
//
// # The flow
//
// A caller builds a Request, asks the executor to Resolve it into a Spec,
// then either runs the Spec in the foreground with Run (a function of this
// package, over the executor's Launch) or starts it in the background
// with the function Start (the executor's Start, bounded by ctx):
//
//	spec, err := ex.Resolve(shell.Request{Command: "go test ./...", Workdir: dir})
//	if err != nil { … } // a bad request: nothing was spawned
//	res, err := shell.Run(ctx, ex, spec)
//	if err != nil { … } // infrastructure failure: missing workdir, no bash, ctx done before the spawn
//	// res.ExitCode, res.Signal, res.TimedOut, res.Aborted, res.Stdout.Text …
//
// # What resolves
//
// Resolve is pure, and written once (Limits.Resolve, with the provider's
// defaults and bounds): it fills the executor's defaults (workdir, timeout),
// resolves a relative workdir against the executor's own cwd, clamps the
// timeout to the executor's maximum silently (the clamped value is what a
// model is told), and refuses bad numbers and a blank command with a
// *RequestError naming the field. Optional fields the caller did not give
// (stdin, env, the stdout cap) stay absent in the Spec. Resolve does not
// look at the file system: a missing workdir is reported when the Spec is
// run or started, because it can vanish in between.
//
// # What errors
//
// Run, Launch and Start return an error only when the command could not be run at
// all: *WorkdirError (the path is named), *SpawnError (bash could not be
// started), ErrAbortedBeforeSpawn (Run's ctx was done before the spawn)
// and ErrClosed. Everything that happens once the command runs is a
// Result, never an error: a non-zero exit, a kill at the timeout, a kill
// because ctx was cancelled, and a command that signals itself. A provider
// that learns of a spawn failure only after Start returned (a remote host)
// settles the Process as StatusKilled instead, and its first Read says
// "spawn failed: <error>" in its stderr part, once (FailedProcess).
//
// # Who owns timeouts
//
// The caller owns cancellation, through ctx. The executor owns the
// timeout, through Spec.Timeout. Both end in the same kill (SIGTERM to the
// whole process group, SIGKILL after the executor's grace) and the first
// cause wins: Result.TimedOut when the executor's timeout fired first,
// Result.Aborted when ctx did; never both. A command that traps SIGTERM
// and exits 0 at its timeout reports exit code 0 and TimedOut. Background
// processes have no timeout: they run until they exit, until Kill, or
// until the executor is closed.
//
// # Output
//
// Each stream keeps a byte-exact tail in memory; a longer stream is marked
// Truncated and, while it stays under the executor's spill cap, written
// whole to a private spill file whose path is reported once the file is
// complete. Text is always valid UTF-8. Background processes are read
// incrementally: each Read returns only what is new, and says Lossy when
// unread bytes were dropped from memory.
//
// # Writing a provider
//
// A provider implements Resolve with Limits.Resolve, Launch, Start and
// Close, and passes the suite in package shell/shelltest. Run needs
// nothing more; a provider whose launch waits (a dial) also implements
// ContextLauncher so that the caller's ctx bounds the wait, in the
// foreground (Run, Launch) and in the background (Start): callers start
// through the functions Launch and Start, never the methods.
//
// # Nothing left behind
//
// Close kills everything the executor started and waits until it is gone.
// Providers go further where they can: shell/local also kills what a
// command left running after it exited and what escaped its process group.
// Each Request names its Owner (the caller's session); an executor that is
// an OwnerEnder kills, when that owner ends, what the owner's commands left
// running, and a Process.Kill takes what its command left outside its
// group. A Process that is a Leftovers counts and kills what its command
// left running once it settled, which a background task reports in its
// status.
package shell
