// Package proc starts, watches, kills and reaps the process trees of conch's commands.
//
// Everything here works from /proc and plain signals, so it has to live
// with four hazards the kernel does not solve for us:
//
//   - Pid reuse. A pid, a process group id or a session id names a process
//     only while something holds that number: the process itself, a
//     zombie that is not reaped yet, or (for group and session ids) any
//     member. Once the last holder is gone the number can be handed to an
//     unrelated process; pid_max is often only 32768. So a group is
//     signalled only while an unreaped zombie of ours holds its number
//     (its leader for Terminate, any member for a Tracker's kill), a
//     single process is signalled through a pidfd after checking its
//     start time (Signal), and only descendants of this process are ever
//     signalled by the Tracker.
//
//   - Blind scans. A scan of /proc cannot prove a group empty: a process
//     that forks and exits in a loop is never seen alive by one. Kills
//     therefore end with a SIGKILL to the group whatever the scans found.
//
//   - Zombies. A process that exited but was not reaped still appears in
//     /proc (state Z) and still makes kill(-pgid, 0) succeed. It runs no
//     code and holds no resources but its pid, so for liveness it counts
//     as gone (GroupAlive, Terminate, Tracker.KillAll), and for hygiene it
//     must be reaped by its parent.
//
//   - ECHILD. A child can be reaped only once. If the orphan reaper of
//     BecomeSubreaper reaped a child that os/exec also waits for, that
//     exec.Cmd.Wait would fail with ECHILD and lose the exit status. The
//     reaper therefore never touches a child that is claimed (Claim, done
//     under LockSpawn between fork and claim) or that stays in this
//     process's own process group (children started with a plain
//     exec.Command, e.g. `go build` in a test). Any other code in the
//     process that starts a child in a new group or session MUST use
//     StartCmd/WaitCmd (or LockSpawn, Claim and Release), or its Wait may
//     fail.
//
// A process that left every tracked session (setsid) is found because this
// process is a child subreaper: when the shell that started such a process
// exits, the process is re-parented to us rather than to init, and stays a
// descendant we may signal.
//
// The other side of that rule: an orphan that stays in OUR process group
// (left behind by a helper started with a plain exec.Command, which shares
// our group) is re-parented to us too, and when it exits the reaper cannot
// tell its zombie from a plain exec.Cmd child waiting for its Wait, so it
// stays a zombie. Commands never cause this (they run in sessions of their
// own and cannot join ours); helpers that may leave background processes
// should be started with StartCmd in a group of their own.
//
// It is Linux-only (a child subreaper, pidfds, /proc): on other systems the
// package is empty, and shell/local, its only user outside tests, refuses
// to start.
package proc
