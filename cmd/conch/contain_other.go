//go:build !linux

package main

import (
	"errors"
	"log/slog"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// executor builds the executor of the stack with o, and says what it
// enforces. Containment and the sandbox are Linux's: elsewhere require,
// or a sandbox the user chose, is refused, and the defaults run without
// them (the default sandbox degraded, docs/sandbox.md).
func (c *config) executor(o *local.Options, log *slog.Logger) (shell.Executor, enforcement, error) {
	if err := c.applyProvider(); err != nil {
		return nil, enforcement{}, err
	}
	_, restricts, err := c.sandboxPolicy()
	if err != nil {
		return nil, enforcement{}, err
	}
	if (restricts && c.sandboxGiven()) || c.containment.v == "require" {
		return nil, enforcement{}, errors.New("containment unavailable: it needs Linux namespaces")
	}
	enf := enforcement{containment: "none (off)", sandbox: "none (off)", project: noSandbox("it needs Linux namespaces")}
	if c.containment.v == "auto" {
		const cause = "it needs Linux namespaces"
		if log != nil {
			log.Warn("containment unavailable: commands run without it", "cause", cause)
		}
		enf.containment = "none (" + cause + ")"
		if restricts {
			enf.sandbox, enf.degraded = enf.containment, true
			if log != nil {
				log.Warn("sandbox unavailable: commands run without a file sandbox", "cause", cause)
			}
		}
	}
	return localProvider(o, enf)
}

// endPrestart does nothing: only Linux starts an init ahead.
func endPrestart() {}
