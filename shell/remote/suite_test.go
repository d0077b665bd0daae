//go:build linux

package remote_test

import (
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestSuite runs the provider suite against a remote executor whose agent
// serves a local executor in this process, over a pipe.
func TestSuite(t *testing.T) {
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		d, _ := servePipe(t, &local.Options{
			Cwd:            c.Cwd,
			Grace:          c.Grace,
			MaxOutputBytes: c.MaxOutputBytes,
			MaxSpillBytes:  c.MaxSpillBytes,
			SpillParent:    c.SpillParent,
			Environ:        c.Environ,
			PassEnv:        c.PassEnv,
		})
		ex, err := remote.New("h1", d, &remote.Options{Cwd: c.Cwd, Timeout: c.Timeout, MaxTimeout: c.MaxTimeout})
		if err != nil {
			t.Fatalf("remote.New: %v", err)
		}
		return ex
	})
}
