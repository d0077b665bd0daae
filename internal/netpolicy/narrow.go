package netpolicy

import (
	"errors"
	"fmt"
	"slices"
)

// Narrowing is what a project file asks of its sessions' network policy
// (docs/configuration.md#project-files): a mode no wider than the
// session's, more deny patterns, the allow list of an allowlist it
// narrows a wider mode to, and whether that allowlist asks.
type Narrowing struct {
	Mode  Mode     `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   *bool    `json:"ask,omitempty"`
}

// IsZero reports whether n narrows nothing.
func (n Narrowing) IsZero() bool {
	return n.Mode == "" && n.Allow == nil && n.Deny == nil && n.Ask == nil
}

// ErrWiden is the cause of Narrow's errors: the narrowing would let
// commands reach more than the session's policy.
var ErrWiden = errors.New("a project file may only narrow the network policy")

// Narrow returns p made stricter by n, or an error wrapping ErrWiden for
// a part of n that would widen p: a wider mode; allow, unless n narrows
// a wider mode to allowlist (its allow list is then n's own); ask = true
// over an allowlist that does not ask.
func (p Policy) Narrow(n Narrowing) (Policy, error) {
	q := p
	if n.Mode != "" {
		if _, err := ParseMode(string(n.Mode)); err != nil {
			return p, err
		}
		if n.Mode.WiderThan(p.Mode) {
			return p, fmt.Errorf("network mode %s is wider than the session's %s: %w", n.Mode, p.Mode, ErrWiden)
		}
		q.Mode = n.Mode
	}
	if q.Mode == Allowlist && p.Mode != Allowlist {
		// A wider mode narrowed to an allowlist: only what the project
		// lists, asking as it says.
		q.Allow, q.Ask = slices.Clone(n.Allow), n.Ask
	} else {
		if n.Allow != nil {
			return p, fmt.Errorf("network allow over the session's %s mode: %w", p.Mode, ErrWiden)
		}
		if n.Ask != nil && *n.Ask && q.Mode == Allowlist && !p.Asks() {
			return p, fmt.Errorf("network ask over an allowlist that does not ask: %w", ErrWiden)
		}
		if n.Ask != nil && !*n.Ask {
			q.Ask = n.Ask
		}
	}
	q.Deny = append(slices.Clip(slices.Clone(p.Deny)), n.Deny...)
	if _, err := q.Compile(); err != nil {
		return p, err
	}
	return q, nil
}
