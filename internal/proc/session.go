package proc

import "time"

// KillSession is KillAll for one command added as sid, its own process
// group included: every process of its session (an interactive shell's
// jobs each have a group of their own), the sessions of escapees
// attributed to it, and their descendants. It suits a command whose
// leader may already be reaped, since each process is signalled by pid
// after a scan, never through a group id.
func (t *Tracker) KillSession(sid int, grace time.Duration) {
	t.kill(grace, scope{root: sid})
}
