//go:build linux

package local_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// warmed runs `true` on ex in dir until the next command finds a warm
// shell (a shell is started after a first command, or after a command
// like the one before it), and waits until that shell has started.
func warmed(t *testing.T, ex *local.Executor, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		run(t, ex, shell.Request{Command: "true", Workdir: dir})
		for wait := time.Now().Add(time.Second); time.Now().Before(wait); time.Sleep(time.Millisecond) {
			if ex.Warmed() {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no warm shell 10 s after foreground commands ended")
		}
	}
}

// TestWarmShellRunsAsBashC: a command that a warm shell runs gives what
// `bash -c` gives it (docs/executor.md#warm-shells): its output, its
// errors and their line numbers, its exit, $0, $#, stdin, $SECONDS, the
// shell options; and it did run in the warm shell (its shell's command
// line is the warm script's).
func TestWarmShellRunsAsBashC(t *testing.T) {
	dir := t.TempDir()
	warm, _ := newExec(t, &local.Options{Warm: true})
	cold, _ := newExec(t, nil)
	commands := []string{
		"echo hi",
		"echo $0 $# \"$*\"",
		"foo",
		"echo 1\necho $LINENO\nbad cmd\necho $?",
		"exit 3",
		"read x; echo \"[$x] $?\"",
		// $SECONDS counts whole seconds of the clock: a start at x.999 s
		// and an echo at x+1.001 s read 1 (one run of CI's in about a
		// hundred, under load). The reset is checked below.
		"echo $((SECONDS <= 1))",
		"echo \"$-\"",
		"set -e; false; echo no",
		"trap 'echo bye' EXIT; echo hi",
		"echo \"${__conch_command-unset}\"",
		"f() { echo $LINENO; caller; }; f",
		"return",
		"kill -TERM $$",
		"printf 'a\\nb\\n' >&2; echo out",
		"cd / && pwd",
		"echo 'trailing'\n\n",
		"x=1\\\n2; echo $x",
		"echo \"[$_]\"",
		"echo \"$BASH_EXECUTION_STRING\"",
	}
	for _, c := range commands {
		warmed(t, warm, dir)
		w := run(t, warm, shell.Request{Command: c, Workdir: dir})
		want := run(t, cold, shell.Request{Command: c, Workdir: dir})
		if got, want := describe(w), describe(want); got != want {
			t.Errorf("%q in a warm shell:\n%s\nunder bash -c:\n%s", c, got, want)
		}
	}
	// $SECONDS counts from the command's start, not from its warm
	// shell's: a shell idle for over 2 s reads 0 or 1 (see above).
	warmed(t, warm, dir)
	time.Sleep(2100 * time.Millisecond)
	if got := run(t, warm, shell.Request{Command: "echo $SECONDS", Workdir: dir}).Stdout.Text; got != "0\n" && got != "1\n" {
		t.Errorf("$SECONDS in a warm shell idle for 2.1 s: %q, want 0 or 1", got)
	}
	warmed(t, warm, dir)
	r := run(t, warm, shell.Request{Command: `tr '\0' ' ' </proc/$$/cmdline`, Workdir: dir})
	if !strings.Contains(r.Stdout.Text, "__conch_command") {
		t.Errorf("the command did not run in a warm shell: its shell's command line is %q", r.Stdout.Text)
	}
}

func describe(r shell.Result) string {
	code := "none"
	if r.ExitCode != nil {
		code = fmt.Sprint(*r.ExitCode)
	}
	return fmt.Sprintf("exit %s signal %q\nstdout %q\nstderr %q", code, r.Signal, r.Stdout.Text, r.Stderr.Text)
}

// TestWarmShellColdWhenItMustBe: a command with stdin, one bash's grammar
// rejects, a background task and a command for another directory do not
// run in the warm shell, and what they give is bash -c's.
func TestWarmShellColdWhenItMustBe(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	ex, _ := newExec(t, &local.Options{Warm: true})
	const probe = `tr '\0' ' ' </proc/$$/cmdline`
	isWarm := func(r shell.Result) bool { return strings.Contains(r.Stdout.Text, "__conch_command") }

	warmed(t, ex, dir)
	r := run(t, ex, shell.Request{Command: "echo a; )", Workdir: dir})
	if !strings.Contains(r.Stderr.Text, "bash: -c: line 1: syntax error") {
		t.Errorf("a syntax error: stderr %q, want bash -c's", r.Stderr.Text)
	}
	warmed(t, ex, dir)
	if r := run(t, ex, shell.Request{Command: probe, Workdir: other}); isWarm(r) {
		t.Error("a command for another directory ran in the warm shell of the first")
	}
	warmed(t, ex, dir)
	if r := run(t, ex, shell.Request{Command: probe + "; cat", Workdir: dir, Stdin: []byte("in")}); isWarm(r) || !strings.HasSuffix(r.Stdout.Text, "in") {
		t.Errorf("a command with stdin: %q", r.Stdout.Text)
	}
	warmed(t, ex, dir)
	p := start(t, ex, shell.Request{Command: probe, Workdir: dir})
	waitDone(t, p, 10*time.Second)
	if out := p.Read().Stdout; strings.Contains(out, "__conch_command") {
		t.Error("a background task ran in the warm shell")
	}
	if ex.Warmed() {
		t.Error("a warm shell after a background task: it would run beside it")
	}
}

// TestWarmShellTimeoutAndKill: a warm shell's command has its own timeout,
// counted from its activation, and a kill takes it.
func TestWarmShellTimeout(t *testing.T) {
	dir := t.TempDir()
	ex, _ := newExec(t, &local.Options{Warm: true})
	warmed(t, ex, dir)
	time.Sleep(300 * time.Millisecond) // the timeout counts from the command, not the shell
	t0 := time.Now()
	r := run(t, ex, shell.Request{Command: "sleep 5", Workdir: dir, Timeout: 200 * time.Millisecond})
	if !r.TimedOut || time.Since(t0) > 3*time.Second {
		t.Errorf("sleep 5 with a 200 ms timeout: TimedOut %v after %v", r.TimedOut, time.Since(t0))
	}
}

// TestWarmShellEndOwner: ending the owner stops its warm shell, and no
// other is started for it.
func TestWarmShellEndOwner(t *testing.T) {
	dir := t.TempDir()
	ex, marker := newExec(t, &local.Options{Warm: true})
	run(t, ex, shell.Request{Command: "true", Workdir: dir, Owner: "a"})
	deadline := time.Now().Add(10 * time.Second)
	for !ex.Warmed() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	ex.EndOwner("a")
	if ex.Warmed() {
		t.Error("a warm shell after EndOwner")
	}
	testutil.AssertNoProcesses(t, marker)
}

// TestWarmShellEndOwnerRace: an owner's command that ends by itself as
// EndOwner runs leaves no warm shell behind it (the shell would start the
// ended owner's boundary again: a contained spawner's new init), and the
// executor keeps nothing per ended owner: the owner's later commands warm
// again. The command is held where it decides on the next shell while
// EndOwner runs.
func TestWarmShellEndOwnerRace(t *testing.T) {
	dir := t.TempDir()
	ex, _ := newExec(t, &local.Options{Warm: true})
	held := make(chan struct{}, 1)
	local.SetPrewarmHook(t, func() {
		select {
		case held <- struct{}{}:
		default:
		}
		time.Sleep(50 * time.Millisecond)
	})
	for range 3 {
		spec, err := ex.Resolve(shell.Request{Command: "true", Workdir: dir, Owner: "a"})
		if err != nil {
			t.Fatal(err)
		}
		p, err := ex.Launch(spec) // a foreground command
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("the command never came to start the next shell")
		}
		ex.EndOwner("a")
		waitDone(t, p, 10*time.Second)
		for range 50 {
			if ex.Warmed() {
				t.Fatal("a warm shell after EndOwner")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	warmed(t, ex, dir)
}

// TestWarmShellQuotesUnderscore: $_ as the shell starts with it comes from
// the environment, which the warm shell's program quotes into the text it
// evals: a value with quotes and substitutions is only a value.
func TestWarmShellQuotesUnderscore(t *testing.T) {
	dir := t.TempDir()
	const hostile = "a b\"$(echo pwned)`echo pwned`'"
	env := append(os.Environ(), "_="+hostile)
	ex, _ := newExec(t, &local.Options{Warm: true, Environ: env})
	warmed(t, ex, dir)
	r := run(t, ex, shell.Request{Command: `echo "[$_]"; tr '\0' ' ' </proc/$$/cmdline`, Workdir: dir})
	if !strings.HasPrefix(r.Stdout.Text, "["+hostile+"]\n") || !strings.Contains(r.Stdout.Text, "__conch_command") {
		t.Errorf("$_ in a warm shell: %q", r.Stdout.Text)
	}
}

// TestWarmShellNotBesideTerminal: a terminal stops the warm shell, and no
// other is started while it runs; one is once it has ended.
func TestWarmShellNotBesideTerminal(t *testing.T) {
	dir := t.TempDir()
	ex, _ := newExec(t, &local.Options{Warm: true})
	warmed(t, ex, dir)
	spec, err := ex.Resolve(shell.Request{Command: "read -r line", Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := ex.StartTerminal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Warmed() {
		t.Error("a warm shell beside a terminal's start")
	}
	run(t, ex, shell.Request{Command: "true", Workdir: dir})
	time.Sleep(200 * time.Millisecond)
	if ex.Warmed() {
		t.Error("a warm shell started beside a running terminal")
	}
	tm.Kill()
	waitDone(t, tm, 10*time.Second)
	warmed(t, ex, dir)
}

// TestWarmShellGuess: the next command is guessed to be like the last
// one only when that one was like the one before it: commands that
// change directory one after another start no shell that the next one
// would stop.
func TestWarmShellGuess(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ex, _ := newExec(t, &local.Options{Warm: true})
	warmed(t, ex, a)
	run(t, ex, shell.Request{Command: "true", Workdir: b}) // stops a's
	time.Sleep(300 * time.Millisecond)
	if ex.Warmed() {
		t.Error("a warm shell after a command unlike the one before it")
	}
	run(t, ex, shell.Request{Command: "true", Workdir: b})
	warmed(t, ex, b)
}

// TestWarmShellReadsNoRcFile: a warm shell reads no rc file, as bash -c
// does not: with stdin a socket, bash would take itself for rshd's and
// read ~/.bashrc (at a shell level below 2); its way in is a pipe.
func TestWarmShellReadsNoRcFile(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	if err := os.WriteFile(home+"/.bashrc", []byte("echo RC-READ\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHLVL=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	ex, _ := newExec(t, &local.Options{Warm: true, Environ: append(env, "HOME="+home)})
	warmed(t, ex, dir)
	r := run(t, ex, shell.Request{Command: `echo hi; tr '\0' ' ' </proc/$$/cmdline`, Workdir: dir})
	if !strings.HasPrefix(r.Stdout.Text, "hi\n") || !strings.Contains(r.Stdout.Text, "__conch_command") {
		t.Errorf("a warm shell with ~/.bashrc: %q", r.Stdout.Text)
	}
}
