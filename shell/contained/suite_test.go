//go:build linux

package contained_test

import (
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestSuite runs the provider suite against the contained provider.
func TestSuite(t *testing.T) {
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		ex, err := contained.New(&local.Options{
			Cwd:            c.Cwd,
			Timeout:        c.Timeout,
			MaxTimeout:     c.MaxTimeout,
			Grace:          c.Grace,
			MaxOutputBytes: c.MaxOutputBytes,
			MaxSpillBytes:  c.MaxSpillBytes,
			SpillParent:    c.SpillParent,
			Environ:        c.Environ,
			PassEnv:        c.PassEnv,
		}, initOptions())
		if err != nil {
			t.Fatalf("contained.New: %v", err)
		}
		return ex
	})
}
