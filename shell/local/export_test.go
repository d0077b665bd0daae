//go:build linux

package local

// Warmed reports whether a warm shell waits for the next command.
func (e *Executor) Warmed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.warm != nil
}
