//go:build linux

package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
)

// A workdir the server may not enter is a workdir error naming it, not a
// spawn failure. Root enters any directory, so the check runs as nobody.
func TestWorkdirWithoutPermission(t *testing.T) {
	if !testutil.AsUnprivileged(t) {
		return
	}
	ex, _ := newExec(t, nil)
	locked := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(locked, 0o600); err != nil { // readable, not searchable
		t.Fatal(err)
	}
	spec, err := ex.Resolve(shell.Request{Command: "pwd", Workdir: locked})
	if err != nil {
		t.Fatal(err)
	}
	for name, spawn := range map[string]func() error{
		"Run":   func() error { _, err := ex.Run(t.Context(), spec); return err },
		"Start": func() error { _, err := ex.Start(spec); return err },
	} {
		err := spawn()
		var we *shell.WorkdirError
		if !errors.As(err, &we) || we.Path != locked || !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s: error %v (%T), want a *shell.WorkdirError for %s with EACCES", name, err, err, locked)
		}
	}
}
