//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// The default spawner has no sandbox: a command whose Request narrows
// one is refused, in the foreground and in a terminal, and runs nothing.
func TestNarrowingWithoutSandbox(t *testing.T) {
	ex, _ := newExec(t, nil)
	flag := t.TempDir() + "/ran"
	spec, err := ex.Resolve(shell.Request{Command: ": > " + flag, Narrowing: &shell.SandboxNarrowing{NetworkOff: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shell.Run(context.Background(), ex, spec); !errors.Is(err, local.ErrNoSandbox) {
		t.Errorf("foreground: %v, want local.ErrNoSandbox", err)
	}
	if _, err := ex.StartTerminal(spec); !errors.Is(err, local.ErrNoSandbox) {
		t.Errorf("terminal: %v, want local.ErrNoSandbox", err)
	}
	if _, err := os.Stat(flag); err == nil {
		t.Error("the refused command ran")
	}
}
