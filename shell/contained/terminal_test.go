//go:build linux

package contained_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// terminalRun runs command on a terminal of ex to its end and returns
// what the terminal showed.
func terminalRun(t *testing.T, ex *local.Executor, command, dir string) string {
	t.Helper()
	spec, err := ex.Resolve(shell.Request{Command: command, Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := ex.StartTerminal(spec)
	if err != nil {
		t.Fatalf("StartTerminal: %v", err)
	}
	select {
	case <-tm.Done():
	case <-time.After(20 * time.Second):
		tm.Kill()
		<-tm.Done()
		t.Fatalf("%q did not end", command)
	}
	return tm.Read()
}

// A terminal's program runs inside the init, like every command of the
// executor: in its PID namespace, where /proc shows neither the server
// nor anything of the host, and under its sandbox, where a write outside
// the writable roots is denied (docs/terminal.md, docs/containment.md).
func testTerminalContained(t *testing.T) {
	marker := testutil.Marker(t)
	// A home outside the temp dirs, which the sandbox leaves writable.
	base, err := os.MkdirTemp("/var/tmp", "conch-tty-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "home", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	plan, err := sandbox.Policy{Workspace: ws, TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	io := initOptions()
	io.Sandbox = plan
	ex, err := contained.New(&local.Options{
		Cwd:         ws,
		Grace:       500 * time.Millisecond,
		SpillParent: t.TempDir(),
		Environ:     []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, testutil.MarkerEnv + "=" + marker},
	}, io)
	if err != nil {
		t.Fatalf("contained.New: %v", err)
	}
	defer testutil.AssertNoProcesses(t, marker)
	defer ex.Close()

	ours, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	piped := shelltest.MustRun(t, ex, shell.Request{Command: "readlink /proc/self/ns/pid"}).Stdout.Text
	server := strconv.Itoa(os.Getpid())
	got := terminalRun(t, ex, "readlink /proc/self/ns/pid; test -e /proc/"+server+" && echo server-visible; "+
		"echo init=$(</proc/1/comm)", ws)
	lines := strings.Split(got, "\n")
	if lines[0] == ours || lines[0]+"\n" != piped {
		t.Errorf("terminal's PID namespace %q; the server's %q, a piped command's %q", lines[0], ours, piped)
	}
	// Pid 1 is the init: this test binary (its name as the kernel keeps
	// it, 15 bytes at most).
	comm := filepath.Base(os.Args[0])
	comm = comm[:min(len(comm), 15)]
	if !strings.Contains(got, "init="+comm+"\n") || strings.Contains(got, "server-visible") {
		t.Errorf("terminal's /proc: %q, want the init as pid 1 and no server", got)
	}

	got = terminalRun(t, ex, "touch ~/x; echo touch=$?; touch y && echo inside=$?", ws)
	if !strings.Contains(got, "Permission denied") || !strings.Contains(got, "touch=1\n") || !strings.Contains(got, "inside=0\n") {
		t.Errorf("sandboxed terminal: %q, want touch ~/x denied and a write in the workspace allowed", got)
	}
	if _, err := os.Stat(filepath.Join(home, "x")); !os.IsNotExist(err) {
		t.Errorf("~/x was written: %v", err)
	}

	// The terminal is the session's own, of its devpts instance: its
	// program can name it, and it is the only one there.
	if got := terminalRun(t, ex, "tty; ls /dev/pts | tr '\\n' ' '", ws); got != "/dev/pts/0\n0 ptmx " {
		t.Errorf("the terminal's name and /dev/pts: %q, want /dev/pts/0 and its instance's", got)
	}
	// /dev/tty names the command's own terminal, which the sandbox's
	// supervisor opens for it (opened as the supervisor it would name
	// the init's, which has none).
	got = terminalRun(t, ex, `echo to-tty > /dev/tty && echo tty=$?; perl -e 'open(T, ">", "/dev/tty") or die "tty: $!\n"; print T "perl-tty\n"'`, ws)
	if !strings.Contains(got, "to-tty\ntty=0\nperl-tty") {
		t.Errorf("a terminal's /dev/tty: %q", got)
	}
}

func TestTerminalContained(t *testing.T) { testTerminalContained(t) }

// TestTerminalContainedUnprivileged is TestTerminalContained as uid
// 65534: an init started by an ordinary user passes the terminal on as
// well.
func TestTerminalContainedUnprivileged(t *testing.T) {
	if !testutil.AsUnprivileged(t) {
		return
	}
	testTerminalContained(t)
}
