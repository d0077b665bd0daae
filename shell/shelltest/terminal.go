//go:build linux

package shelltest

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
)

// The terminal cases hold the promises of shell.Terminals
// (docs/terminal.md) for a provider that offers it, wherever it runs its
// commands: the terminal is the program's controlling terminal, C-c
// interrupts its foreground job, prompts, hidden input and terminal
// queries work, and a kill takes everything the program started.

// interactiveShell is a command that becomes an interactive bash with
// the prompt "$ " and no history file.
const interactiveShell = `export PS1='$ ' HISTFILE=/dev/null; exec bash --norc --noprofile -i`

// startTerminal starts command on a terminal of ex, skipping the test
// when ex has none (a provider may not offer terminals), and closes it
// at the test's end.
func startTerminal(t *testing.T, ex shell.Executor, command string) *transcript {
	t.Helper()
	ts, ok := ex.(shell.Terminals)
	if !ok {
		t.Skip("this provider offers no terminals (shell.Terminals)")
	}
	spec, err := ex.Resolve(shell.Request{Command: command, Owner: "owner"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	tm, err := ts.StartTerminal(spec)
	if err != nil {
		t.Fatalf("StartTerminal(%q): %v", command, err)
	}
	t.Cleanup(func() {
		tm.Kill()
		<-tm.Done()
	})
	return &transcript{t: t, tm: tm}
}

// transcript is what a test has read of a terminal so far, by Read and
// by Input (which returns a read).
type transcript struct {
	t  *testing.T
	tm shell.Terminal
	b  strings.Builder
}

// until reads until what was read so far contains want, for at most 10 s
// (a loaded machine starts programs slowly), and returns it.
func (r *transcript) until(want string) string {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.b.String(), want) {
		if time.Now().After(deadline) {
			r.t.Fatalf("%q never appeared; read %q", want, r.b.String())
		}
		r.b.WriteString(r.tm.Read())
		time.Sleep(10 * time.Millisecond)
	}
	return r.b.String()
}

// input is Input that must succeed, with a wait long enough for a loaded
// machine; it returns Input's read, which the transcript keeps.
func (r *transcript) input(text string, keys ...string) string {
	r.t.Helper()
	out, err := r.tm.Input(text, keys, 5*time.Second)
	if err != nil {
		r.t.Fatalf("Input(%q, %q): %v", text, keys, err)
	}
	r.b.WriteString(out)
	return out
}

// end waits at most 10 s for the terminal to end and returns the whole
// transcript.
func (r *transcript) end() string {
	r.t.Helper()
	WaitDone(r.t, r.tm, 10*time.Second)
	r.b.WriteString(r.tm.Read())
	return r.b.String()
}

// TerminalIsControlling: the program's standard input is the terminal,
// which is the controlling terminal of its own session (/dev/tty opens),
// with TERM=xterm-256color.
func testTerminalIsControlling(t *testing.T, su *suite) {
	ex, _ := su.exec(t, Config{})
	r := startTerminal(t, ex, `test -t 0 && echo stdin-tty; exec 3</dev/tty && echo controlling; `+
		`s=($(</proc/$$/stat)); [ "${s[5]}" = $$ ] && [ "${s[4]}" = $$ ] && echo own-session; echo "TERM=$TERM"`)
	if got, want := r.end(), "stdin-tty\ncontrolling\nown-session\nTERM=xterm-256color\n"; got != want {
		t.Errorf("read %q, want %q", got, want)
	}
	if code, sig := r.tm.Exit(); code == nil || *code != 0 || sig != "" {
		t.Errorf("exit %v %q, want 0", code, sig)
	}
}

// TerminalInterrupt: C-c stops the foreground job of an interactive
// shell, not the shell, which goes on and then exits when told.
func testTerminalInterrupt(t *testing.T, su *suite) {
	ex, _ := su.exec(t, Config{})
	r := startTerminal(t, ex, interactiveShell)
	r.until("$ ")
	r.input("sleep 300", "Enter")
	r.input("", "C-c")
	r.input("echo alive $?", "Enter")
	r.until("alive 130") // the job died of SIGINT
	r.input("exit 7", "Enter")
	r.end()
	if code, sig := r.tm.Exit(); code == nil || *code != 7 || sig != "" {
		t.Errorf("exit %v %q, want 7: the shell did not survive C-c", code, sig)
	}
}

// TerminalPrompts: a line REPL, a hidden password prompt and a program
// that asks the terminal where its cursor is (ESC[6n) and waits for the
// answer all work on the terminal.
func testTerminalPrompts(t *testing.T, su *suite) {
	ex, _ := su.exec(t, Config{})
	t.Run("REPL", func(t *testing.T) {
		r := startTerminal(t, ex, `while IFS= read -r -p '> ' l; do echo "= ${l^^}"; done; echo bye`)
		r.until("> ")
		if got := r.input("hello", "Enter"); got != "> hello\n= HELLO\n> " {
			t.Errorf("after hello: %q", got)
		}
		r.input("", "C-d")
		if got := r.end(); !strings.HasSuffix(got, "> bye\n") {
			t.Errorf("after C-d: %q", got)
		}
	})
	t.Run("Password", func(t *testing.T) {
		r := startTerminal(t, ex, `IFS= read -rs -p 'Password: ' pw; echo; echo "got ${#pw} characters"`)
		r.until("Password: ")
		r.input("s3cret", "Enter")
		if got := r.end(); !strings.Contains(got, "got 6 characters") || strings.Contains(got, "s3cret") {
			t.Errorf("read %q, want the count and no echo", got)
		}
	})
	t.Run("CursorQuery", func(t *testing.T) {
		r := startTerminal(t, ex, `printf 'abc\e[6n'; IFS= read -rs -d R pos; echo; echo "cursor at ${pos#*[}"`)
		if got := r.end(); !strings.Contains(got, "cursor at 1;4\n") {
			t.Errorf("read %q, want the answer to ESC[6n", got)
		}
	})
}

// TerminalKillTakesAll: Kill stops an interactive shell (which ignores
// SIGTERM), the jobs it put in groups of their own and what left its
// session; nothing is left.
//
// It runs alone (serial): `setsid sleep 301` forks, and its child is
// re-parented to the executor's process as soon as setsid exits. The
// local provider attributes such an escapee by its start time, which
// names a command only while no other executor of the process runs one
// (proc.Tracker; the README's "Several executors in one process"): an
// escapee nobody owns is taken by any executor's Close. Beside the
// suite's parallel cases, another case's Close killed the sleep before
// the test saw it ("timed out after 10s waiting for the two sleeps").
func testTerminalKillTakesAll(t *testing.T, su *suite) {
	ex, marker := su.exec(t, Config{Grace: 300 * time.Millisecond})
	r := startTerminal(t, ex, interactiveShell)
	r.until("$ ")
	r.input("sleep 300 & setsid sleep 301 & echo started", "Enter")
	// The command is typed and run while we look: wait for the sleeps
	// themselves, not for a count of processes (a child of the shell that
	// has not yet run setsid or exec carries the marker too).
	testutil.WaitFor(t, 10*time.Second, "the two sleeps", func() bool {
		seen := map[string]bool{}
		for _, p := range testutil.Processes(marker) {
			seen[testutil.Cmdline(p.Pid)] = true
		}
		return seen["sleep 300"] && seen["sleep 301"]
	})
	r.tm.Kill()
	r.end()
	if code, sig := r.tm.Exit(); code != nil || sig == "" {
		t.Errorf("exit %v %q, want a signal", code, sig)
	}
	testutil.AssertNoProcesses(t, marker)
}
