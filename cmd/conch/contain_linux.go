//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
)

// executor builds the executor of the stack with o, and says what it
// enforces. With containment on (or a sandbox that restricts, which only
// an init enforces) it is the contained provider: each session's commands
// run in an init of their own (docs/containment.md). With
// --containment auto a host that allows no init gets the plain local
// provider, and the cause is logged once; with require, or with a
// restricting sandbox, or with --max-pids or --max-memory, the error
// names the cause, as it does when the host cannot enforce part of the
// sandbox or a limit.
func (c *config) executor(o *local.Options, log *slog.Logger) (*local.Executor, enforcement, error) {
	pol, restricts, err := c.sandboxPolicy()
	if err != nil {
		return nil, enforcement{}, err
	}
	mode := c.containment.v
	limited := c.maxPids.v > 0 || c.maxMemory.v > 0 // only an init's cgroups enforce them
	if restricts || limited {
		mode = "require"
	}
	if mode == "off" {
		ex, err := local.New(o)
		return ex, enforcement{containment: "none (off)", sandbox: "none (off)"}, err
	}
	// The init is this binary (see nsinit.go); a crash of it is
	// written where conch logs.
	initOpts := nsinit.Options{
		Args: []string{nsinit.HelperArg}, Stderr: os.Stderr,
		MaxPids: int64(c.maxPids.v), MaxMemory: int64(c.maxMemory.v),
	}
	if restricts {
		if initOpts.Sandbox, err = pol.Resolve(); err != nil {
			return nil, enforcement{}, err
		}
	}
	probe := nsinit.Probe()
	if probe.Cgroup.Writable {
		initOpts.Cgroup = probe.Cgroup.Dir
	}
	ex, err := contained.New(o, &initOpts)
	if err != nil {
		if mode == "require" {
			return nil, enforcement{}, fmt.Errorf("containment unavailable: %w", err)
		}
		cause := err.Error()
		if log != nil {
			log.Warn("containment unavailable: commands run without it", "cause", cause)
		}
		ex, err := local.New(o)
		return ex, enforcement{containment: "none (" + cause + ")", sandbox: "none (off)"}, err
	}
	if un := contained.Unenforced(ex); len(un) > 0 {
		ex.Close()
		return nil, enforcement{}, fmt.Errorf("sandbox %s: this host cannot enforce %s", pol.Mode, strings.Join(un, ", "))
	}
	sb := "none (off)"
	if restricts {
		sb = fmt.Sprintf("%s, network %s", initOpts.Sandbox.Mode, initOpts.Sandbox.Network)
	}
	return ex, enforcement{containment: probe.Summary(), sandbox: sb, contained: true}, nil
}

// toolsExecutor is the executor the tools get: a contained one without
// its terminals.
func toolsExecutor(ex *local.Executor, enf enforcement) shell.Executor {
	if enf.contained {
		return withoutTerminals{ex}
	}
	return ex
}

// withoutTerminals is the local executor, spawning through an init, with
// everything the tools use but its terminals: those start outside the
// init, out of its namespaces and sandbox, so tty is not offered.
type withoutTerminals struct{ ex *local.Executor }

var (
	_ shell.FileSystem = withoutTerminals{}
	_ shell.Graceful   = withoutTerminals{}
	_ shell.OwnerEnder = withoutTerminals{}
)

func (w withoutTerminals) Resolve(r shell.Request) (shell.Spec, error) { return w.ex.Resolve(r) }
func (w withoutTerminals) Launch(s shell.Spec) (shell.Process, error)  { return w.ex.Launch(s) }
func (w withoutTerminals) Start(s shell.Spec) (shell.Process, error)   { return w.ex.Start(s) }
func (w withoutTerminals) Close() error                                { return w.ex.Close() }
func (w withoutTerminals) Dir(path string) (string, error)             { return w.ex.Dir(path) }
func (w withoutTerminals) Home() (string, error)                       { return w.ex.Home() }
func (w withoutTerminals) Grace() time.Duration                        { return w.ex.Grace() }
func (w withoutTerminals) EndOwner(owner string)                       { w.ex.EndOwner(owner) }
