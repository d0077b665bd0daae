package sandbox

import (
	"errors"
	"fmt"
	"slices"
)

// Granted returns p with dirs, directories the user let a session's
// commands write for the rest of the session
// (docs/sandbox.md#escalation), added to the writable roots of the
// Policy p was resolved from: resolved again, so the repositories under
// them are protected like any writable root's. It is p itself without
// dirs, or in full-access, where everything is writable already; an error
// in read-only mode, which has no writable roots, and for a Plan not made
// by Resolve. Like Resolve, it reads the disk.
func (p *Plan) Granted(dirs []string) (*Plan, error) {
	switch {
	case len(dirs) == 0 || p.Mode == FullAccess:
		return p, nil
	case p.Mode != WorkspaceWrite:
		return nil, fmt.Errorf("sandbox: writes cannot be granted under %s mode", p.Mode)
	case p.policy == nil:
		return nil, errors.New("sandbox: the plan was not resolved from a policy")
	}
	pol := *p.policy
	pol.Mode, pol.Network = p.Mode, p.Network
	pol.WritableRoots = append(slices.Clip(pol.WritableRoots), dirs...)
	return pol.Resolve()
}
