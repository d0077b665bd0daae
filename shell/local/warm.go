//go:build linux

package local

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/conch-dev/conch/shell"
)

// Warm shells (Options.Warm, docs/executor.md#warm-shells). bash spends
// most of a short command's time starting (its exec, the dynamic linker,
// its locale and environment): about 5 ms of a 6 ms `bash -c 'echo hi'`
// here, against under 1 ms to run `echo hi` in a bash that has started.
// So once a foreground command has ended, with nothing else of the
// executor's running, the executor starts the next one's bash ahead, for
// the same directory, environment, owner and sandbox: warmScript, which
// reads its command from stdin and evals it. A foreground command that
// fits it (warmable) gets that shell; any other start, and any other
// command, stops it first, so a warm shell never runs beside another
// command of the executor's (the init's ledger charges an orphan whose
// parent it never saw to every command alive when it started:
// docs/containment.md#killing-what-a-command-left).
//
// The way in is a pipe on stdin, not a unix socket: bash reads ~/.bashrc
// when its stdin is a socket (it takes itself for rshd's). So without a
// sandbox a process of the same user may write into it through
// /proc/<pid>/fd/0, as it may ptrace any later shell there; the sandbox
// refuses that open (TestWarmShellContained).
//
// The command runs as under `bash -c`: $0 is "bash", stdin is /dev/null,
// $SECONDS counts from its start, $_ and $BASH_EXECUTION_STRING are the
// same, line numbers and errors read the same (`bash: line 1: foo:
// command not found`). What differs: the shell's own command line
// (/proc/<pid>/cmdline, ps) shows warmScript, `declare -p` lists
// PIPESTATUS and a value for SECONDS, and a syntax error would name
// `eval` rather than `-c`, which is why a command bash's grammar (as
// mvdan.cc/sh parses it) rejects goes to a cold `bash -c`.

// warmScript is the warm shell's program: it reads the command from
// stdin to its end, gives the command /dev/null as stdin, its own
// $SECONDS and $BASH_EXECUTION_STRING, and runs it, with the variables
// it used unset and $_ as the shell started with it (from the
// environment: shell-quoted into the eval'd text).
const warmScript = `__conch_u=$_; IFS= read -r -d '' __conch_command; exec </dev/null; printf -v __conch_u %q "$__conch_u"; ` +
	`SECONDS=0; BASH_EXECUTION_STRING=$__conch_command; eval "unset __conch_command __conch_u; : $__conch_u; $__conch_command"`

// maxWarmCommand bounds the command a warm shell takes: bash's read
// builtin takes a pipe one byte per system call.
const maxWarmCommand = 4 << 10

// warmable reports whether s may run in a warm shell.
func warmable(s shell.Spec) bool {
	if s.Stdin != nil || len(s.Command) > maxWarmCommand || strings.ContainsRune(s.Command, 0) {
		return false
	}
	_, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s.Command), "")
	return err == nil
}

// shapeOf is s without its command, timeout and stdin: what a warm shell
// is started for, and must match in the command it runs.
func shapeOf(s shell.Spec) *shell.Spec {
	s.Command, s.Timeout, s.Stdin = "", 0, nil
	return &s
}

// sameShell reports whether a shell started for a may run b: everything
// but the command and its timeout is the same.
func sameShell(a, b shell.Spec) bool {
	return a.Workdir == b.Workdir && a.StdoutMaxBytes == b.StdoutMaxBytes &&
		maps.Equal(a.Env, b.Env) && maps.Equal(a.ManagedEnv, b.ManagedEnv) &&
		a.Owner == b.Owner && a.Workspace == b.Workspace &&
		reflect.DeepEqual(a.Narrowing, b.Narrowing) && slices.Equal(a.Grants, b.Grants)
}

// endWarm stops the warm shell of owner, once any start in flight has
// ended (EndOwner).
func (e *Executor) endWarm(owner string) {
	e.mu.Lock()
	e.awaitPrewarm()
	w := e.warm
	if w != nil && w.owner == owner {
		e.warm = nil
	} else {
		w = nil
	}
	e.mu.Unlock()
	if w != nil {
		w.stop(causeKill, false)
	}
}

// hold keeps warm shells from being started until the returned func is
// called: a start is in flight, or a terminal runs.
func (e *Executor) hold() (release func()) {
	e.mu.Lock()
	e.busy++
	e.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			e.busy--
			e.mu.Unlock()
		})
	}
}

// awaitPrewarm waits until no warm shell's start is in flight. mu is held,
// and released while it waits.
func (e *Executor) awaitPrewarm() {
	for e.prewarming != nil {
		ch := e.prewarming
		e.mu.Unlock()
		<-ch
		e.mu.Lock()
	}
}

// takeWarm returns the warm shell, activated for s, when s is a
// foreground command (timed) it may run; otherwise it stops the warm
// shell, if any, and returns nil. A start in flight is waited for.
func (e *Executor) takeWarm(s shell.Spec, timed bool) *command {
	e.mu.Lock()
	e.awaitPrewarm()
	w := e.warm
	e.warm = nil
	e.mu.Unlock()
	if w == nil {
		return nil
	}
	if timed && sameShell(*w.shape, s) && warmable(s) && w.activate(s) {
		return w
	}
	w.discard()
	return nil
}

// discard kills the warm shell c, which ran no command, without waiting:
// its group (the shell alone) is killed, and nothing charged to it is
// looked for. An orphan of another command's that the contained
// provider's ledger charges to it too while it dies is not its to kill
// (rule 4 charges such an orphan to every command alive when it
// started): it stays the other command's.
func (c *command) discard() {
	c.mu.Lock()
	if !c.warm || c.cause != causeNone || c.reaping {
		c.mu.Unlock()
		return
	}
	c.warm = false
	c.cause = causeKill
	done := make(chan struct{})
	c.killDone = done
	c.mu.Unlock()
	go func() {
		defer close(done) // wait() awaits it before the release
		c.child.Terminate(0)
	}()
}

// activate gives the warm shell c its command, s, unless it has ended or
// is being stopped; it reports whether it did.
func (c *command) activate(s shell.Spec) bool {
	c.mu.Lock()
	if !c.warm || c.shellExited || c.cause != causeNone || c.reaping {
		c.mu.Unlock()
		return false
	}
	c.warm = false
	c.shell.Args = []string{"bash", "-c", s.Command}
	c.shell.Started = time.Now()
	c.timeout = s.Timeout
	if c.timeout > 0 {
		c.timer = time.AfterFunc(c.timeout, func() { c.stop(causeTimeout, false) })
	}
	timer := c.timer
	c.mu.Unlock()
	// At most PIPE_BUF bytes (maxWarmCommand): written whole, at once.
	_, err := c.stdinW.Write([]byte(s.Command))
	c.stdinW.Close()
	if err != nil {
		// No reader: the shell died after the check above (its wait
		// closes the pipe). Its end is its own; the command runs cold.
		if timer != nil {
			timer.Stop()
		}
		return false
	}
	return true
}

// prewarmHook, when set (by a test), runs in prewarm once c is known to
// be a command after which a shell may be started: the moment a loaded
// machine may hold it there.
var prewarmHook atomic.Pointer[func()]

// stillWarm reports whether c is a warm shell that was given no command.
func (c *command) stillWarm() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warm
}

// prewarm starts the next foreground command's shell after c, a
// foreground command that ended, when the executor runs nothing else and
// has no warm shell.
func (e *Executor) prewarm(c *command) {
	// Only after a foreground command without stdin that ended by
	// itself: not after a kill (an ended owner's among them), a
	// background task, or a warm shell that ran nothing.
	if c.shape == nil || c.causeOf() != causeNone || c.stillWarm() {
		return
	}
	if h := prewarmHook.Load(); h != nil {
		(*h)()
	}
	s := c.shape
	e.startMu.RLock()
	defer e.startMu.RUnlock()
	if e.closed {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// The next command is guessed to be like this one: after a first
	// command, or one like the command before it. Commands that change
	// directory (or owner) one after another get none, rather than a
	// shell started and stopped for each.
	stable := e.lastForeground == nil || sameShell(*e.lastForeground, *s)
	e.lastForeground = s
	others := len(e.live)
	if _, ok := e.live[c]; ok {
		others-- // c itself, not yet forgotten
	}
	if !stable || e.warm != nil || e.prewarming != nil || others > 0 || e.busy > 0 {
		return
	}
	ch := make(chan struct{})
	e.prewarming = ch
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		w, err := e.start(*s, false, true)
		e.mu.Lock()
		if err == nil {
			e.warm = w
		}
		e.prewarming = nil
		e.mu.Unlock()
		close(ch)
	}()
}
