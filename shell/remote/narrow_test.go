//go:build linux

package remote_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
)

// A project's narrowing of this machine's sandbox cannot reach a host:
// the command is refused, in the foreground, the background and a
// terminal, and nothing runs there.
func TestNarrowingRefused(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		flag := t.TempDir() + "/ran"
		spec, err := ex.Resolve(shell.Request{Command: ": > " + flag, Narrowing: &shell.SandboxNarrowing{Mode: "read-only"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := shell.Run(context.Background(), ex, spec); !errors.Is(err, remote.ErrNarrowing) {
			t.Errorf("foreground: %v, want remote.ErrNarrowing", err)
		}
		if _, err := ex.Start(spec); !errors.Is(err, remote.ErrNarrowing) {
			t.Errorf("background: %v, want remote.ErrNarrowing", err)
		}
		if _, err := ex.StartTerminal(spec); !errors.Is(err, remote.ErrNarrowing) {
			t.Errorf("terminal: %v, want remote.ErrNarrowing", err)
		}
		if _, err := os.Stat(flag); err == nil {
			t.Error("a refused command ran")
		}
	})
}
