//go:build linux

package local_test

import (
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestSuite runs the provider suite against the local provider.
func TestSuite(t *testing.T) {
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		return newSuiteExec(t, c, nil)
	})
}

// newSuiteExec makes a local executor as the suite configures it; with
// set, set may change its options first.
func newSuiteExec(t *testing.T, c shelltest.Config, set func(*local.Options)) *local.Executor {
	t.Helper()
	o := &local.Options{
		Cwd:            c.Cwd,
		Timeout:        c.Timeout,
		MaxTimeout:     c.MaxTimeout,
		Grace:          c.Grace,
		MaxOutputBytes: c.MaxOutputBytes,
		MaxSpillBytes:  c.MaxSpillBytes,
		SpillParent:    c.SpillParent,
		Environ:        c.Environ,
		PassEnv:        c.PassEnv,
	}
	if set != nil {
		set(o)
	}
	ex, err := local.New(o)
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	return ex
}
