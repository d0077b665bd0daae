//go:build linux

// Package remotetest is what the transports' runs of the provider suite
// (shell/shelltest) through a real `conch agent` share: the agent's
// flags for a suite Config, and an executor that gives every command the
// suite's marker.
package remotetest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/shelltest"
)

// AgentArgs are the flags of `conch agent` that hold its commands to c's
// settings (its Cwd included, when set).
func AgentArgs(c shelltest.Config) []string {
	args := []string{"--grace-ms", strconv.FormatInt(c.Grace.Milliseconds(), 10)}
	for _, f := range []struct {
		flag string
		v    int64
	}{
		{"--timeout-ms", c.Timeout.Milliseconds()}, {"--max-timeout-ms", c.MaxTimeout.Milliseconds()},
		{"--max-output-bytes", int64(c.MaxOutputBytes)}, {"--max-spill-bytes", c.MaxSpillBytes},
	} {
		if f.v > 0 {
			args = append(args, f.flag, strconv.FormatInt(f.v, 10))
		}
	}
	for _, name := range c.PassEnv {
		args = append(args, "--pass-env", name)
	}
	if c.Cwd != "" {
		args = append(args, "--cwd", c.Cwd)
	}
	return args
}

// AgentEnviron splits c.Environ into the environment the agent should
// start with (the suite's, its TMPDIR the spill parent, where the agent
// makes its spill directory) and the suite's marker. The marker reaches
// the commands through each spawn (Marked), not through the agent's own
// environment: the agent is a process of the executor, not one of its
// commands, and the suite counts the processes that carry it.
func AgentEnviron(c shelltest.Config) (env []string, marker string) {
	for _, kv := range c.Environ {
		if v, ok := strings.CutPrefix(kv, testutil.MarkerEnv+"="); ok {
			marker = v
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+c.SpillParent), marker
}

// Marked gives every command it spawns the suite's marker, as the
// suite's Environ would (Resolve is left alone: the suite checks what it
// fills in).
type Marked struct {
	Executor
	Marker string
}

// Executor is what a transport's executor is: a remote.Executor, or a
// container template (container.Template) that holds one per owner.
type Executor interface {
	shell.Executor
	shell.ContextLauncher
	shell.OwnerEnder
	shell.Terminals
	Hello(context.Context) (agent.Hello, error)
}

var _ Executor = (*remote.Executor)(nil)

func (e Marked) marked(s shell.Spec) shell.Spec {
	env := map[string]string{testutil.MarkerEnv: e.Marker}
	for k, v := range s.Env {
		env[k] = v
	}
	s.Env = env
	return s
}

func (e Marked) Launch(s shell.Spec) (shell.Process, error) { return e.Executor.Launch(e.marked(s)) }
func (e Marked) Start(s shell.Spec) (shell.Process, error)  { return e.Executor.Start(e.marked(s)) }
func (e Marked) LaunchContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return e.Executor.LaunchContext(ctx, e.marked(s))
}
func (e Marked) StartContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return e.Executor.StartContext(ctx, e.marked(s))
}
func (e Marked) StartTerminal(s shell.Spec) (shell.Terminal, error) {
	return e.Executor.StartTerminal(e.marked(s))
}

// EnvironFile writes env, NUL-separated, to a new file in dir that
// everyone may read (a wrapper reads it as the agent's user), removed at
// t's end, and returns its path. A test transport's wrapper starts the
// agent with that environment only when its arguments end with
// '--test-environ' and the file.
func EnvironFile(t testing.TB, dir string, env []string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "environ-")
	if err == nil {
		_, err = f.WriteString(strings.Join(env, "\x00") + "\x00")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	return f.Name()
}
