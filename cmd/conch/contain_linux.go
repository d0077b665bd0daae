//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
)

// executor builds the executor of the stack with o, and says what it
// enforces. With containment on (or a sandbox that restricts, which only
// an init enforces) it is the contained provider: one init serves every
// session of the executor, so HTTP sessions share its namespaces. With
// --containment auto a host that allows no init gets the plain local
// provider, and the cause is logged once; with require, or with a
// restricting sandbox, the error names the cause, as it does when the
// host cannot enforce part of the sandbox.
func (c *config) executor(o *local.Options, log *slog.Logger) (*local.Executor, enforcement, error) {
	pol, restricts, err := c.sandboxPolicy()
	if err != nil {
		return nil, enforcement{}, err
	}
	mode := c.containment.v
	if restricts {
		mode = "require"
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
	return ex, enforcement{containment: probe.Summary(), sandbox: sb}, nil
}
