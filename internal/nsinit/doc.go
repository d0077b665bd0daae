// Package nsinit runs a session's commands inside a PID namespace, under a small init that conch starts once per session.
//
// Start re-executes the server's binary (conch's hidden subcommand
// HelperArg, which calls Main) in new user, PID and mount namespaces. The
// user namespace maps the server's uid and gid to themselves, so `id -u`
// prints the same number inside and files keep their owner. The init is
// pid 1 there: it makes every mount private, mounts a /proc of its own
// (the server and the host's processes are not in it), and then serves
// requests over a unix socket: spawn a command (argv, environment,
// directory, and its stdin, stdout and stderr passed as descriptors) in
// a process group of its own in the init's session (a terminal's
// program: in a session of its own), signal its group, report its raw
// wait status, kill everything it left behind, and reap every process
// of the namespace.
//
// The kernel enforces the rest: when pid 1 of a PID namespace exits,
// every process in it is killed. The init exits when the server closes
// the socket (Init.Close) and dies with the server (a parent-death
// signal), so even a SIGKILLed server leaves nothing behind.
//
// One init per session, not per command: a user namespace is cloned by
// a full fork of the server (Go cannot vfork there), whose cost grows
// with the server's memory, and a Go init would start its runtime for
// every command. A command forked by a running init costs about what a
// bare spawn costs. The price is that killing one command and what it
// left is the init's bookkeeping rather than the kernel's: see the
// ledger's rules in account.go.
//
// A command gets no capabilities from the init: a non-root init clears
// the ambient capabilities it needed to mount /proc before it forks, and
// the bounding set of every command lacks CAP_SYS_ADMIN (root inside
// could otherwise unmount the namespace's /proc and see the host's) and
// CAP_SYS_PTRACE (it could reach into the init). The init is not
// dumpable and ignores every signal a command sends it.
//
// With Options.Sandbox, the init also enforces a sandbox plan (package
// sandbox) on itself before it serves, so every command inherits it:
// protected paths mounted read-only and denied paths hidden, Landlock
// and a seccomp filter on the thread it forks commands from, every
// capability out of that thread's bounding set, and with the network off
// a network namespace of its own. The filter hands the commands' writes
// and socket calls to the sandbox's supervisor, which runs on the
// init's other threads; what it denies is charged by the ledger to the
// commands that started the process, and reaches the server before the
// process goes on (Child.Denials).
package nsinit
