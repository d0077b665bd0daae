//go:build linux

package proc

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/prestart"
)

// ReaperFunc is the function the orphan reaper goroutine runs, for leak
// checkers that must ignore it (goleak.IgnoreAnyFunction(ReaperFunc)).
const ReaperFunc = "github.com/conch-dev/conch/internal/proc.reapLoop"

// reapInterval rate-limits the orphan reaper: a burst of exits costs one
// scan, then at most one more per interval, the last one after the burst.
const reapInterval = 50 * time.Millisecond

var (
	// spawnMu orders spawns against reaping: a spawn holds it for reading
	// from before the fork until its pid is claimed, and the reaper and
	// Tracker.KillAll hold it for writing while they scan and reap. So
	// no scan ever sees a child that was forked but not yet claimed.
	spawnMu sync.RWMutex
	// forkMu is held for reading with spawnMu by every spawn, and for
	// writing only by MayHaveLeftovers, to wait for the spawns under way
	// to claim their children. Nothing holds it across a scan of /proc, so
	// that wait is as short as the spawns' (spawnMu may be held by a
	// kill's whole scan).
	forkMu sync.RWMutex

	// pinned counts, per zombie child, the kills that keep it unreaped
	// for now: while it is unreaped its process group id cannot be
	// reused, so the kill may signal the group. Guarded by spawnMu.
	pinned = map[int]int{}

	claimMu sync.Mutex
	claimed = map[int]int{} // pid → number of claims

	subreaperOnce sync.Once
	subreaperErr  error
	subreaper     atomic.Bool // BecomeSubreaper succeeded

	reapScans       atomic.Int64 // scans the orphan reaper started; for tests
	groupScanRounds atomic.Int64 // scans GroupAlive started; for tests
)

// BecomeSubreaper makes this process a child subreaper
// (PR_SET_CHILD_SUBREAPER): a process whose parent exits is re-parented to
// its nearest subreaper ancestor instead of init, so everything our
// commands start stays our descendant, even after it left its group and
// session. It then starts the orphan reaper, a goroutine woken by SIGCHLD
// that reaps the zombies among our direct children that nobody else will
// wait for: those that are not claimed and not in this process's own
// process group (see the package doc for why both conditions matter).
//
// It runs once per process; later calls return the first result. The
// subreaper flag is process-wide and survives for the life of the
// process. It fails only if prctl fails (e.g. a kernel older than 3.4).
func BecomeSubreaper() error {
	subreaperOnce.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			subreaperErr = fmt.Errorf("proc: prctl(PR_SET_CHILD_SUBREAPER): %w", err)
			return
		}
		subreaper.Store(true)
		// One buffered slot: SIGCHLDs that arrive while a scan runs or
		// while the loop rests collapse into one wake-up.
		sigc := make(chan os.Signal, 1)
		signal.Notify(sigc, unix.SIGCHLD)
		go reapLoop(sigc)
	})
	return subreaperErr
}

func reapLoop(sigc <-chan os.Signal) {
	reapOrphans() // zombies that were re-parented before we listened
	for range sigc {
		reapOrphans()
		time.Sleep(reapInterval)
	}
}

// reapOrphans reaps every zombie direct child that no one else waits for,
// in a round of killScans (which any kill's scan may share), when a round
// is worth its scan of /proc (reapWorth).
func reapOrphans() {
	if !reapWorth() {
		return
	}
	reapScans.Add(1)
	killScans.do(nil)
}

// reapWorth reports whether a round of the orphan reaper may find work:
// a tracker tracks commands (the round attributes their escapees, see
// Tracker), or a child that no one waits for may be a zombie (see
// orphans). Otherwise the round is skipped: a server whose commands
// run in inits (each claimed, and whose tracker tracks nothing) would
// scan /proc at its start and at every init's end for nothing.
func reapWorth() bool {
	registry.mu.Lock()
	tracked := len(registry.sessions) > 0
	registry.mu.Unlock()
	if tracked {
		return true
	}
	adopted, err := orphans()
	return err != nil || len(adopted) > 0
}

// reapLocked reaps the zombies in infos that are reapable; spawnMu must be
// held for writing, and infos must have been read under it.
func reapLocked(infos []Info, self, selfPgid int) {
	for _, p := range infos {
		if p.PPid != self || p.State != 'Z' || p.Pgid == selfPgid || isClaimed(p.Pid) || pinned[p.Pid] > 0 {
			continue
		}
		// The pid cannot have been reused since the scan: it is our
		// zombie, and only we (holding spawnMu) reap unclaimed children.
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(p.Pid, &ws, unix.WNOHANG, nil); err != unix.EINTR {
				break
			}
		}
	}
}

// LockSpawn must be held while a child that leaves our process group
// (Setsid or Setpgid) is started and until its pid is claimed, so that
// neither the orphan reaper nor Tracker.KillAll can look at the child in
// between: the reaper would reap it if it exited at once (and its
// exec.Cmd.Wait would fail with ECHILD), and KillAll would take it for an
// escapee. Many spawns may hold it at once. It must not be taken twice by
// one goroutine, nor held while calling Tracker.KillAll (which takes it
// for writing): both deadlock. unlock may be called more than once.
func LockSpawn() (unlock func()) {
	spawnMu.RLock()
	forkMu.RLock()
	return sync.OnceFunc(func() {
		forkMu.RUnlock()
		spawnMu.RUnlock()
	})
}

// WaitSpawns returns once every spawn that holds LockSpawn at the call has
// released it. A child forked by such a spawn holds copies of the
// parent's descriptors until it execs, and StartCmd returns only after
// the exec: so a pipe whose write end is still open after WaitSpawns is
// not held by a child between fork and exec (of spawns that use
// LockSpawn). It must not be called while holding LockSpawn.
func WaitSpawns() {
	prestart.Wait()
	spawnMu.Lock()
	spawnMu.Unlock()
}

// claim records that pid, a child of this process, is waited for by other
// code (os/exec), so the orphan reaper and Tracker.KillAll never reap it.
// Call it under LockSpawn, right after the fork.
func claim(pid int) {
	claimMu.Lock()
	claimed[pid]++
	claimMu.Unlock()
}

// Release undoes StartCmd's claim. Call it only after exec.Cmd.Wait (or
// os.Process.Wait) has returned: before that the child may still be an
// unreaped zombie, which the reaper would take from under Wait.
func Release(pid int) {
	claimMu.Lock()
	if claimed[pid] <= 1 {
		delete(claimed, pid)
	} else {
		claimed[pid]--
	}
	claimMu.Unlock()
}

func isClaimed(pid int) bool {
	claimMu.Lock()
	c := claimed[pid] > 0
	claimMu.Unlock()
	// The init package prestart started is its taker's to wait for.
	return c || prestart.Pending(pid)
}

// Claim is claim for a child this process started without StartCmd: the
// init package prestart started, when nsinit takes it.
func Claim(pid int) { claim(pid) }

// StartCmd starts cmd under LockSpawn and claims its pid: the way to start
// a child that leaves our process group. Pair it with WaitCmd.
//
// A parent-death signal (SysProcAttr.Pdeathsig) fires when the OS THREAD
// that forked the child exits, not when the process does. The Go runtime
// keeps its threads, except that a goroutine which exits while locked with
// runtime.LockOSThread takes its thread with it: do not start children
// with Pdeathsig from such a goroutine, or they are killed at once.
//
// A process that is not root and starts a child in a new user namespace
// writes the child's uid and gid maps into /proc/<pid>/, which the kernel
// gives to root while the child is not dumpable, as it is when this
// process is not (NonDumpable) until the child's exec: the write would
// fail with EACCES. StartCmd then makes this process dumpable for the
// fork and exec, ordered with NonDumpable, which would otherwise take it
// back in the middle of a start.
func StartCmd(cmd *exec.Cmd) error {
	if mapsIDs(cmd) && os.Getuid() != 0 {
		dumpMu.Lock()
		defer dumpMu.Unlock()
		if was, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err == nil && was == 0 {
			unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
			defer unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		}
	}
	unlock := LockSpawn()
	defer unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	claim(cmd.Process.Pid)
	return nil
}

// WaitCmd waits for a cmd started by StartCmd, then releases its pid.
func WaitCmd(cmd *exec.Cmd) error {
	err := cmd.Wait()
	if cmd.Process != nil && cmd.ProcessState != nil {
		Release(cmd.Process.Pid)
	}
	return err
}

// WaitExited blocks until pid, a child of this process, has exited, and
// leaves it unreaped: its zombie keeps holding its pid (and, for a group
// leader, its process group id), so the group can still be signalled
// safely until the caller reaps it (exec.Cmd.Wait). It returns the
// child's wait status once it has exited, or the error of waitid (ECHILD
// when pid is not our child, or was reaped already).
func WaitExited(pid int) (syscall.WaitStatus, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return waitStatus(&info), nil
	}
}

// sigchld is the start of a siginfo_t of SIGCHLD on 64-bit Linux: the
// union that follows si_code is 8-byte aligned.
type sigchld struct {
	signo, errno, code int32
	_                  int32
	pid                int32
	uid                uint32
	status             int32
}

// si_code values of SIGCHLD (the x/sys/unix package does not name them).
const (
	cldKilled = 2
	cldDumped = 3
)

// waitStatus turns what waitid reported into the status wait4 would give.
func waitStatus(info *unix.Siginfo) syscall.WaitStatus {
	c := (*sigchld)(unsafe.Pointer(info))
	switch c.code {
	case cldKilled:
		return syscall.WaitStatus(c.status & 0x7f)
	case cldDumped:
		return syscall.WaitStatus(c.status&0x7f | 0x80)
	default: // CLD_EXITED
		return syscall.WaitStatus(c.status&0xff) << 8
	}
}

// dumpMu orders NonDumpable with the starts that make this process
// dumpable for a moment (StartCmd).
var dumpMu sync.Mutex

// NonDumpable makes this whole process non-dumpable (PR_SET_DUMPABLE 0):
// a process of the same user can then not read its environment or memory
// through /proc, nor write to its open files. It waits for a StartCmd that
// made the process dumpable for its child's start to end.
func NonDumpable() error {
	// An unprivileged start writes its child's id maps while this
	// process is dumpable.
	prestart.Wait()
	dumpMu.Lock()
	defer dumpMu.Unlock()
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// mapsIDs reports whether cmd starts in a new user namespace whose uid or
// gid map this process writes.
func mapsIDs(cmd *exec.Cmd) bool {
	a := cmd.SysProcAttr
	return a != nil && a.Cloneflags&unix.CLONE_NEWUSER != 0 && (len(a.UidMappings) > 0 || len(a.GidMappings) > 0)
}
