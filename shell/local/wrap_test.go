//go:build linux

package local_test

import (
	"os/exec"
	"testing"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// wrapWithEnv is a trivial second provider's spawn hook: every shell
// starts under env(1), which rebuilds the environment from nothing (-i)
// out of the command's own variables, adds WRAPPED_BY=env, and then
// executes bash in its place (same pid, group and session).
func wrapWithEnv(t *testing.T) func(*exec.Cmd) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env is needed for this test: %v", err)
	}
	return func(cmd *exec.Cmd) {
		args := append([]string{"env", "-i"}, cmd.Env...)
		args = append(args, "WRAPPED_BY=env", cmd.Path)
		cmd.Args = append(args, cmd.Args[1:]...)
		cmd.Path = envBin
	}
}

// TestSuiteWrapped runs the provider suite against the local provider
// whose shells start under a wrapper (Options.Wrap).
func TestSuiteWrapped(t *testing.T) {
	wrap := wrapWithEnv(t)
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		return newSuiteExec(t, c, func(o *local.Options) { o.Wrap = wrap })
	})
}

// The wrapper really runs: its variable reaches the command, and the
// command is still the leader of its own group (env executed bash).
func TestWrapRuns(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Wrap: wrapWithEnv(t)})
	r := run(t, ex, shell.Request{Command: `echo "$WRAPPED_BY"; [ "$(ps -o pgid= -p $$ | tr -d ' ')" = $$ ] && echo leader`})
	if r.Stdout.Text != "env\nleader\n" || code(r) != 0 {
		t.Errorf("wrapped command: %+v", r)
	}
}
