//go:build linux

// Package shelltest is the test suite every provider of the shell seam
// passes, in the spirit of testing/fstest: Run holds each promise of the
// Executor and Process interfaces that does not depend on how a provider
// runs its commands (exit codes and signals, timeout, abort and
// self-signal, stdin, output caps and spill files, incremental and lossy
// reads, Peek, Kill, the bounded drain, the environment scrub and
// overlay, Resolve, workdir errors, Close leaving nothing behind, and
// the terminals of a provider that offers shell.Terminals).
// Promises that belong to one provider (the local provider's subreaper,
// escapees, non-dumpable process) stay in that provider's tests.
package shelltest

import (
	"os"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
)

// Config is what the suite asks of an executor. A zero field means the
// provider's default. The executor must run its commands with the
// environment Environ (scrubbed and overlaid as any other) and put its
// spill files under SpillParent, a directory of this machine (whatever
// host their Output.Host names), so that the suite can find its commands
// by marker and look at its files.
type Config struct {
	// Cwd is the default workdir.
	Cwd string
	// Timeout and MaxTimeout are the default and the largest foreground
	// timeout.
	Timeout, MaxTimeout time.Duration
	// Grace is the delay between SIGTERM and SIGKILL and the bound on the
	// drain after the shell's exit. The suite always sets it.
	Grace time.Duration
	// MaxOutputBytes is the in-memory tail kept per stream;
	// MaxSpillBytes caps each stream's spill file.
	MaxOutputBytes int
	MaxSpillBytes  int64
	// SpillParent is where the provider makes its spill directory. The
	// suite always sets it.
	SpillParent string
	// Environ is the environment commands start from, before the scrub;
	// PassEnv names variables of it that survive the scrub. The suite
	// always sets Environ; it carries the test's marker.
	Environ []string
	PassEnv []string
}

// NewExecutor makes the executor under test for one subtest. The suite
// closes it at the subtest's end, then checks that no process carrying
// the subtest's marker is left; a provider that needs more cleanup (a
// connection, a server) registers it with t.Cleanup, which runs after.
// It calls t.Fatal when the executor cannot be made.
type NewExecutor func(t *testing.T, c Config) shell.Executor

// Run runs the suite against the executors newExecutor makes, as
// subtests of t. Subtests run in parallel with each other, so
// newExecutor must be safe for concurrent use. The package that calls
// Run checks for leaked goroutines in its TestMain
// (testutil.VerifyTestMain).
func Run(t *testing.T, newExecutor NewExecutor) {
	s := &suite{newExecutor: newExecutor}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.serial {
				t.Parallel()
			}
			tc.run(t, s)
		})
	}
}

type suite struct{ newExecutor NewExecutor }

type testCase struct {
	name string
	run  func(t *testing.T, s *suite)
	// serial: the case runs alone, before the parallel ones: it measures
	// the machine (heap, CPU), or its promise holds only while no other
	// executor of this process runs commands (testTerminalKillTakesAll).
	serial bool
}

const defaultGrace = 500 * time.Millisecond

// exec returns an executor for c with the suite's settings filled in: a
// marker in its environment, a private spill parent, a short grace. At
// cleanup it closes the executor and checks that nothing is left.
func (s *suite) exec(t *testing.T, c Config) (shell.Executor, string) {
	t.Helper()
	marker := testutil.Marker(t)
	if c.Environ == nil {
		c.Environ = os.Environ()
	}
	c.Environ = append(c.Environ[:len(c.Environ):len(c.Environ)], testutil.MarkerEnv+"="+marker)
	if c.SpillParent == "" {
		c.SpillParent = t.TempDir()
	}
	if c.Grace == 0 {
		c.Grace = defaultGrace
	}
	ex := s.newExecutor(t, c)
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
	})
	return ex, marker
}
