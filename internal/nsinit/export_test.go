//go:build linux

package nsinit

import "time"

// SetStartTimeout sets the wait for a new init's first answer, for a
// test, and returns what restores it.
func SetStartTimeout(d time.Duration) func() {
	old := startTimeout
	startTimeout = d
	return func() { startTimeout = old }
}

// Pid is the spare's process, for a test.
func (s *Spare) Pid() int { return s.cmd.Process.Pid }
