package tasks

import (
	"maps"
	"slices"
)

// Owners returns the owners that hold tasks now, in no particular order:
// for a caller that reports what Close is about to end.
func (r *Runtime) Owners() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Keys(r.owners))
}
