//go:build linux

package local

import "testing"

// Warmed reports whether a warm shell waits for the next command.
func (e *Executor) Warmed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.warm != nil
}

// SetPrewarmHook runs f where a command that may be followed by a warm
// shell is about to start one, for the rest of the test.
func SetPrewarmHook(t *testing.T, f func()) {
	prewarmHook.Store(&f)
	t.Cleanup(func() { prewarmHook.Store(nil) })
}
