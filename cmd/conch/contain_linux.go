//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
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
	enf := enforcement{containment: probe.Summary(), sandbox: "none (off)"}
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
