//go:build linux

package proc

import "golang.org/x/sys/unix"

// ShortSlice asks the scheduler to give the calling thread the shortest
// time slice it grants (0.1 ms; Linux 6.12), keeping its policy and nice
// value, and to give the processes and threads it starts the default
// slice again (SCHED_FLAG_RESET_ON_FORK). It leaves alone a thread whose
// children that flag would change otherwise (a real-time policy, a
// negative nice value: they would start at SCHED_NORMAL, nice 0), and
// does nothing on an older kernel.
// It is for a locked thread that mostly sleeps and answers: its share of
// the CPU is unchanged, but on a CPU busy with other work it no longer
// waits for the running task's whole slice (1.4 ms on this 2-core
// machine) before it runs once woken. The init's serving thread and the
// sandbox supervisor's workers take it (docs/containment.md#the-init-runs-on-one-p).
func ShortSlice() error {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return err
	}
	switch {
	case a.Policy != unix.SCHED_NORMAL && a.Policy != unix.SCHED_BATCH:
		return nil // a real-time policy its starter chose: its children keep it
	case a.Nice < 0:
		return nil // RESET_ON_FORK would give its children nice 0
	case a.Runtime == 0:
		return nil // no slices to set (before Linux 6.12, which reports the slice here)
	}
	// Only this flag: the utilisation clamps sched_getattr reports are
	// left as they are.
	a.Flags = unix.SCHED_FLAG_RESET_ON_FORK
	a.Runtime = 100_000 // ns: the kernel's least
	return unix.SchedSetAttr(0, a, 0)
}
