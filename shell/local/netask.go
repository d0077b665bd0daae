//go:build linux

package local

import "github.com/conch-dev/conch/shell"

var _ shell.NetworkAskers = (*Executor)(nil)

// LendNetworkAsker implements shell.NetworkAskers for a Spawner whose
// network policy asks (the contained provider's); with another Spawner
// nothing asks, and release does nothing.
func (e *Executor) LendNetworkAsker(owner string, a shell.NetworkAsker) (release func()) {
	if l, ok := e.spawner.(shell.NetworkAskers); ok {
		return l.LendNetworkAsker(owner, a)
	}
	return func() {}
}
