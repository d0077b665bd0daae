package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// readTerminal reads tm until the text read so far contains want.
func readTerminal(t *testing.T, tm shell.Terminal, want string) string {
	t.Helper()
	var got strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(got.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q never appeared; read %q", want, got.String())
		}
		got.WriteString(tm.Read())
		time.Sleep(10 * time.Millisecond)
	}
	return got.String()
}

// A terminal command gets the executor's environment policy (scrubbed
// secrets, the managed overlay, PWD) with the emulator's TERM, runs in its
// workdir with the terminal as stdin, and belongs to its owner: EndOwner
// ends it and what it left running in its session.
func TestStartTerminal(t *testing.T) {
	ex, marker := newExec(t, &local.Options{Environ: append(os.Environ(), "MY_API_TOKEN=hidden")})
	dir := t.TempDir()
	spec, err := ex.Resolve(shell.Request{
		Command:    `echo "term=$TERM token=${MY_API_TOKEN:-none} owner=$CONCH_SESSION_ID pwd=$PWD"; test -t 0 && echo stdin-is-a-tty; nohup sleep 300 >/dev/null 2>&1 & read -r line; echo "got $line"`,
		Workdir:    dir,
		ManagedEnv: map[string]string{"CONCH_SESSION_ID": "s1"},
		Owner:      "s1",
	})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := ex.StartTerminal(spec)
	if err != nil {
		t.Fatal(err)
	}
	got := readTerminal(t, tm, "stdin-is-a-tty")
	if want := "term=xterm-256color token=none owner=s1 pwd=" + dir + "\nstdin-is-a-tty\n"; !strings.HasPrefix(got, want) {
		t.Errorf("terminal read %q, want %q first", got, want)
	}
	for deadline := time.Now().Add(10 * time.Second); len(testutil.Processes(marker)) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if len(testutil.Processes(marker)) < 2 {
		t.Fatalf("the command and its nohup sleep are not both running: %v", testutil.Processes(marker))
	}
	ex.EndOwner("s1")
	select {
	case <-tm.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("EndOwner left the terminal running")
	}
	if code, sig := tm.Exit(); code != nil || sig == "" {
		t.Errorf("exit %v %q, want a signal", code, sig)
	}
	testutil.AssertNoProcesses(t, marker)
}

// A workdir that is missing or a file is a *shell.WorkdirError naming it,
// and a closed executor starts no terminal. Close waits for a running
// terminal to end.
func TestStartTerminalRefusals(t *testing.T) {
	ex, marker := newExec(t, nil)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{filepath.Join(file, "..", "missing"): syscall.ENOENT, file: syscall.ENOTDIR} {
		spec, _ := ex.Resolve(shell.Request{Command: "true", Workdir: path})
		_, err := ex.StartTerminal(spec)
		var we *shell.WorkdirError
		if !errors.As(err, &we) || we.Path != filepath.Clean(path) || !errors.Is(err, want) {
			t.Errorf("workdir %s: %v, want a *shell.WorkdirError with %v", path, err, want)
		}
	}
	spec, _ := ex.Resolve(shell.Request{Command: "sleep 300"})
	tm, err := ex.StartTerminal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tm.Done():
	default:
		t.Error("Close returned before the terminal was released")
	}
	testutil.AssertNoProcesses(t, marker)
	if _, err := ex.StartTerminal(spec); !errors.Is(err, shell.ErrClosed) {
		t.Errorf("StartTerminal after Close: %v", err)
	}
}
