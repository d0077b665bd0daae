package sandbox

import (
	"fmt"

	"github.com/conch-dev/conch/internal/netpolicy"
)

// WithNetwork returns a copy of p whose network policy is narrowed by n
// (a project file's, docs/configuration.md#project-files); p itself when
// n narrows nothing. It is an error, wrapping netpolicy.ErrWiden, for a
// part of n that would widen p's policy.
func (p *Plan) WithNetwork(n netpolicy.Narrowing) (*Plan, error) {
	if n.IsZero() {
		return p, nil
	}
	net, err := p.Net.Narrow(n)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	q := *p
	q.Net, q.Network = net, Network(net.Mode)
	if q.policy != nil {
		pol := *q.policy
		pol.Network, pol.Net = q.Network, q.Net
		q.policy = &pol
	}
	return &q, nil
}

// Filtered reports whether the plan's network goes through conch's stack
// (public or allowlist).
func (p *Plan) Filtered() bool { return netpolicy.Mode(p.Network).Filtered() }
