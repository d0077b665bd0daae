//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
)

// executor builds the executor of the stack with o, and says what it
// enforces. With containment on (or a sandbox that restricts, which only
// an init enforces) it is the contained provider: one init serves every
// session of the executor, so HTTP sessions share its namespaces.
//
// What the host cannot give is refused or degraded (docs/containment.md,
// docs/sandbox.md): --containment require, and a sandbox the user chose
// (sandboxGiven), refuse to start naming the cause. The defaults degrade:
// --containment auto on a host that allows no init gets the plain local
// provider, and the default sandbox runs with what the host allows; each
// cause is logged once, and a missing file sandbox makes the enforcement
// degraded (the bash description says so). An explicit --containment off
// turns the default sandbox off with the init it needs.
func (c *config) executor(o *local.Options, log *slog.Logger) (*local.Executor, enforcement, error) {
	pol, restricts, err := c.sandboxPolicy()
	if err != nil {
		return nil, enforcement{}, err
	}
	given := restricts && c.sandboxGiven()
	mode := c.containment.v
	switch {
	case given:
		mode = "require"
	case mode == "off":
		restricts = false
	}
	if mode == "off" {
		ex, err := local.New(o)
		return ex, enforcement{containment: "none (off)", sandbox: "none (off)"}, err
	}
	// The init is this binary (see nsinit.go); a crash of it is
	// written where conch logs.
	initOpts := nsinit.Options{Args: []string{nsinit.HelperArg}, Stderr: os.Stderr}
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
		enf := enforcement{containment: "none (" + cause + ")", sandbox: "none (off)"}
		if log != nil {
			log.Warn("containment unavailable: commands run without it", "cause", cause)
		}
		if restricts {
			enf.sandbox, enf.degraded = "none ("+string(pol.Mode)+" unavailable: "+cause+")", true
			if log != nil {
				log.Warn("sandbox unavailable: commands run without a file sandbox", "mode", pol.Mode, "cause", cause)
			}
		}
		ex, err := local.New(o)
		return ex, enf, err
	}
	enf := enforcement{containment: probe.Summary(), sandbox: "none (off)", contained: true}
	if restricts {
		enf.sandbox = fmt.Sprintf("%s, network %s", initOpts.Sandbox.Mode, initOpts.Sandbox.Network)
	}
	if un := contained.Unenforced(ex); len(un) > 0 {
		missing := strings.Join(un, ", ")
		if given {
			ex.Close()
			return nil, enforcement{}, fmt.Errorf("sandbox %s: this host cannot enforce %s", pol.Mode, missing)
		}
		enf.sandbox += " (not enforced: " + missing + ")"
		enf.degraded = slices.ContainsFunc(un, func(u string) bool { return strings.HasPrefix(u, sandbox.UnenforcedFiles) })
		if log != nil {
			log.Warn("sandbox partly unavailable: commands run with what the host allows", "mode", pol.Mode, "missing", missing)
		}
	}
	return ex, enf, nil
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
