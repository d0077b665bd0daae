//go:build linux

package contained_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestWarmShellContained: under the default sandbox, a foreground
// command runs in the warm shell its init started ahead
// (docs/executor.md#warm-shells), inside the namespace, and its sandbox
// denials are its own; Close leaves nothing.
func TestWarmShellContained(t *testing.T) {
	dir, initOpts := sandboxedWorkspace(t, "conch-warm-")
	marker := testutil.Marker(t)
	ex, err := contained.New(&local.Options{Cwd: dir, SpillParent: t.TempDir(), Environ: testutil.Env(marker), Warm: true}, initOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
	})
	runIn := func(command string) shell.Result {
		return shelltest.MustRun(t, ex, shell.Request{Command: command, Workdir: dir, Owner: "s"})
	}
	runIn("true")
	const probe = `tr '\0' ' ' </proc/$$/cmdline; echo; echo $$ $PPID`
	var r shell.Result
	testutil.WaitFor(t, 10*time.Second, "a command in a warm shell", func() bool {
		r = runIn(probe)
		return strings.Contains(r.Stdout.Text, "__conch_command")
	})
	if f := strings.Fields(strings.SplitN(r.Stdout.Text, "\n", 2)[1]); len(f) != 2 || f[1] != "1" {
		t.Errorf("the warm shell's pid and parent: %q, want the init (1) as its parent", f)
	}
	// A directory this user may write, outside the sandbox's writable
	// roots: its refusal is the sandbox's.
	out, err := os.MkdirTemp("/var/tmp", "conch-warm-out-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	denied := filepath.Join(out, "f")
	testutil.WaitFor(t, 10*time.Second, "a denial in a warm shell", func() bool {
		r = runIn("echo x > " + denied + "; tr '\\0' ' ' </proc/$$/cmdline")
		return strings.Contains(r.Stdout.Text, "__conch_command")
	})
	if r.Sandbox == nil || len(r.Sandbox.Denied) != 1 || r.Sandbox.Denied[0].Path != denied {
		t.Errorf("the warm shell's denial: %+v, want %s", r.Sandbox, denied)
	}
	if r := runIn("true"); r.Sandbox == nil || len(r.Sandbox.Denied) != 0 {
		t.Errorf("the next command was told of the previous one's denial: %+v", r.Sandbox)
	}

	// A hostile command leaves a process that waits for the next warm
	// shell and writes a command of its own into that shell's stdin
	// through /proc: the sandbox refuses the open, and the next command
	// is the caller's. (The pattern is built in two parts, so that only
	// warm shells' command lines hold it whole; this command's own shell
	// is one, and is skipped.)
	outcome := filepath.Join(dir, "inject")
	runIn(`( p=__conch_; p=${p}command
	  for i in $(seq 400); do
	    for f in /proc/[0-9]*/cmdline; do
	      [[ $(tr -d '\0' < "$f" 2>/dev/null) == *"$p"* ]] || continue
	      pid=${f#/proc/}; pid=${pid%/cmdline}
	      [ "$pid" = $$ ] || [ "$pid" = $BASHPID ] && continue # this command's own shells
	      if printf 'echo INJECTED\0' > /proc/$pid/fd/0; then echo wrote; else echo refused; fi > ` + outcome + ` 2>&1
	      exit
	    done
	    sleep 0.05
	  done ) >/dev/null 2>&1 &`)
	testutil.WaitFor(t, 30*time.Second, "the injector's try", func() bool {
		// Its last line: a refused open's error message comes first.
		b, err := os.ReadFile(outcome)
		return err == nil && (strings.HasSuffix(string(b), "wrote\n") || strings.HasSuffix(string(b), "refused\n"))
	})
	if b, _ := os.ReadFile(outcome); !strings.HasSuffix(string(b), "refused\n") {
		t.Errorf("a leftover writing into the warm shell's stdin: %q, want it refused", b)
	}
	if r := runIn("echo mine; tr '\\0' ' ' </proc/$$/cmdline"); !strings.HasPrefix(r.Stdout.Text, "mine\n") || strings.Contains(r.Stdout.Text, "INJECTED") {
		t.Errorf("the command after the injector's try printed %q", r.Stdout.Text)
	}
}
