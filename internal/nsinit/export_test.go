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

// DelayStartCheck makes a start wait d between its init's answer and its
// check against the start timeout, for a test, and returns what restores
// it.
func DelayStartCheck(d time.Duration) func() {
	startAnswered = func() { time.Sleep(d) }
	return func() { startAnswered = nil }
}

// Pid is the spare's process, for a test.
func (s *Spare) Pid() int { return s.proc.Pid }

// DelayExited makes the spare's end known d after its reaper saw it, as
// when the reaper's goroutine has not run yet: for a test of a spare that
// died an instant before Start took it.
func (s *Spare) DelayExited(d time.Duration) {
	reaped, late := s.exited, make(chan struct{})
	go func() {
		<-reaped
		time.Sleep(d)
		close(late)
	}()
	s.exited = late
}

// SlowSpawnTail makes every spawn of this process, as an init, end d
// later, after its lock is released: as a loaded machine leaves the
// init's thread waiting for the CPU there.
func SlowSpawnTail(d time.Duration) { spawnTail = func() { time.Sleep(d) } }

// NoReaper makes this process, as an init, start no reaper: its commands'
// exits are reported through their pidfds alone, and nothing else is
// reaped.
func NoReaper() { noReaper = true }
