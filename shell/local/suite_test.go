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
		return newSuiteExec(t, c)
	})
}

// newSuiteExec makes a local executor as the suite configures it.
func newSuiteExec(t *testing.T, c shelltest.Config) *local.Executor {
	t.Helper()
	ex, err := local.New(&local.Options{
		Cwd:            c.Cwd,
		Timeout:        c.Timeout,
		MaxTimeout:     c.MaxTimeout,
		Grace:          c.Grace,
		MaxOutputBytes: c.MaxOutputBytes,
		MaxSpillBytes:  c.MaxSpillBytes,
		SpillParent:    c.SpillParent,
		Environ:        c.Environ,
		PassEnv:        c.PassEnv,
	})
	if err != nil {
		t.Fatalf("local.New: %v", err)
	}
	return ex
}
