//go:build linux

package proc

import (
	"cmp"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Tracker records the sessions of one executor's commands, so that closing
// the executor, ending one of its callers' sessions (an owner), or killing
// one command can kill everything they left behind. It is safe for
// concurrent use. The zero value is not usable; call NewTracker.
//
// Which sessions are tracked is kept process-wide: a session id is a pid,
// and once every member of a session is gone the number may be handed to a
// new command of another executor in this process. Add therefore moves a
// session id to the tracker that adds it last, so one executor's KillAll
// never takes another executor's newer command for an old session of its
// own. Sessions seen empty are forgotten from time to time, so a
// long-running server does not accumulate them.
//
// A process that leaves its command's session (setsid) is attributed to
// the command when a scan of /proc for a kill, a prune or the orphan
// reaper sees it: while its parent lives, by descent; once it was
// re-parented to this process, by its start time, when it started while
// the commands of exactly one owner ran. Its new session is then tracked
// for that command and owner, so its own descendants are too.
// What a hostile command can still escape this way is said at Add.
type Tracker struct {
	_ [0]func() // not comparable, not copyable by accident
	// id makes every Tracker a distinct, non-zero-size value, so that
	// pointers to two trackers never compare equal.
	id uint64
}

type sessionEntry struct {
	tracker *Tracker
	owner   string // the owner the command was added with
	root    int    // the session id of the command it came from
	seq     uint64 // distinguishes a re-Add of the same id from the entry a prune looked at
	suspect bool   // seen without a live member by the previous prune
	// start and end bound when the command ran, in clock ticks since
	// boot (end is 0 while it runs); set for a command's own session
	// only (sid == root).
	start, end uint64
	// leader is the start time of the process whose pid is the session
	// id, when the entry was made (0: not known). A live process with
	// that pid and another start time makes the entry stale: the pid was
	// reused, so the session it named is gone, and the one of that id
	// now is another's (dropStaleLocked).
	leader uint64
	// leaderGone, for an entry whose leader was not alive when it was
	// made (leader 0): the latest start time of that scan. The leader
	// started before the session's members, which were alive then, so
	// a process with the session id's pid that started after it is
	// another: the pid was reused.
	leaderGone uint64
}

var registry struct {
	mu       sync.Mutex
	sessions map[int]*sessionEntry
	seq      uint64
	pruneAt  int
	pruning  bool
	trackers uint64
}

const minPruneAt = 256

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.trackers++
	return &Tracker{id: registry.trackers}
}

// Add tracks the session sid of a command run for owner (any label, ""
// included; KillOwner takes what its commands left): sid is the pid of the
// command's shell, which is also its process group id and session id.
// Call it right before the spawn's lock is released, while the shell's
// pid is claimed (so the number cannot have been reused), and call Exited
// once the shell has exited.
//
// Sessions stay tracked until a kill takes them, or until a periodic prune
// sees them empty: a group member that outlives its shell's normal exit (a
// server a model started on purpose) is left running and killed by
// KillAll, KillOwner or KillCommand.
//
// What escapes the attribution (it is bookkeeping by the same user, not a
// kernel boundary): a process that leaves its session and whose parent
// exits before any scan saw it, when it started while commands of another
// owner ran too, or after its command's shell exited (forked by a
// background process of the command, or by an escapee, that exited since);
// and a process that calls setsid at every fork of a fork loop (no scan
// sees it, and each zombie it leaves names a new group).
// KillAll still takes the first kind; nothing here takes the second.
func (t *Tracker) Add(sid int, owner string) {
	if sid <= 1 {
		return
	}
	// The command's window opens when its shell started, not when Add
	// runs: the shell may fork escapees at once, while the caller is
	// descheduled between the spawn and Add for many clock ticks (a
	// loaded machine). The pid is claimed, so it is still the shell's,
	// even if it exited already. A pid that cannot be read opens no
	// window: its escapees are left to KillAll.
	var start uint64
	if p, err := Stat(sid); err == nil {
		start = p.StartTime
	}
	registry.mu.Lock()
	if registry.sessions == nil {
		registry.sessions = make(map[int]*sessionEntry)
	}
	registry.seq++
	registry.sessions[sid] = &sessionEntry{tracker: t, owner: owner, root: sid, seq: registry.seq, start: start, leader: start}
	prune := !registry.pruning && len(registry.sessions) >= max(registry.pruneAt, minPruneAt)
	if prune {
		registry.pruning = true
	}
	registry.mu.Unlock()
	if prune {
		pruneSessions()
	}
}

// Exited records that the shell of the command added as sid has exited:
// a process that starts later is not attributed to it by its start time.
func (t *Tracker) Exited(sid int) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if e := registry.sessions[sid]; e != nil && e.tracker == t && e.root == sid && e.end == 0 {
		e.end = ticksNow()
	}
}

// ticksNow is the time in the unit of Info.StartTime: clock ticks
// (USER_HZ, 100 on every Linux ABI) since boot.
func ticksNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*100 + uint64(ts.Nsec)/1e7
}

// pruneSessions forgets sessions that have no live member, nor a zombie
// child of ours, in two prunes in a row (one Scan can miss a member forked
// during it), after attributing the escapees the scan sees. A session
// cannot gain members once it has none, so forgetting it loses nothing.
func pruneSessions() {
	registry.mu.Lock()
	seen := make(map[int]uint64, len(registry.sessions))
	for sid, e := range registry.sessions {
		seen[sid] = e.seq
	}
	registry.mu.Unlock()

	// The scan also attributes escapees (every round of killScans does):
	// a command whose session is forgotten takes with it the window by
	// which an escapee re-parented to us is attributed.
	// A zombie child of ours counts as a member, as for the attribution:
	// it is all a scan sees of a process that forks in a loop, and a
	// session forgotten under such a loop would leave it to any
	// tracker's KillAll as an escapee nobody owns, and to no KillOwner.
	var err error
	live := make(map[int]bool)
	self := os.Getpid()
	killScans.do(func(s *snapshot) {
		err = s.err
		for _, p := range s.infos {
			if p.Alive() || p.State == 'Z' && p.PPid == self {
				live[p.Sid] = true
			}
		}
	})

	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.pruning = false
	if err == nil {
		for sid, seq := range seen {
			e := registry.sessions[sid]
			if e == nil || e.seq != seq {
				continue
			}
			switch {
			case live[sid]:
				e.suspect = false
			case e.suspect:
				delete(registry.sessions, sid)
			default:
				e.suspect = true
			}
		}
	}
	registry.pruneAt = 2*len(registry.sessions) + minPruneAt
}

// scope selects what a kill takes: every session of the tracker and every
// escapee nobody owns (all), the sessions of one owner (byOwner), or those
// of one command (root).
type scope struct {
	all     bool
	byOwner bool
	owner   string
	root    int
	// skipGroup is a process group the kill leaves to Terminate: its
	// members are not signalled one by one (a trap would run twice), but
	// their descendants in other groups are.
	skipGroup int
	// groupGone, when not nil, is closed once skipGroup is gone; the
	// kill's end waits for it (see KillCommand).
	groupGone <-chan struct{}
}

func (sc scope) match(e *sessionEntry) bool {
	switch {
	case sc.all:
		return true
	case sc.byOwner:
		return e.owner == sc.owner
	default:
		return e.root == sc.root
	}
}

// sessionsFor returns the ids of the tracked sessions that t's kill in
// scope sc takes (true) and, for a kill of all, of every other tracked
// session (false).
func (t *Tracker) sessionsFor(sc scope) map[int]bool {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	m := make(map[int]bool)
	for sid, e := range registry.sessions {
		if take := e.tracker == t && sc.match(e); take || sc.all {
			m[sid] = take
		}
	}
	return m
}

func (t *Tracker) forget(sids map[int]bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for sid := range sids {
		if e := registry.sessions[sid]; e != nil && e.tracker == t {
			delete(registry.sessions, sid)
		}
	}
	registry.pruneAt = 2*len(registry.sessions) + minPruneAt
}

// KillAll kills every live process that belongs to t and waits until all
// are gone, reaping the zombies among our unclaimed children. It returns
// after at most about grace + KillWait.
//
// It belongs to t:
//
//	(a) every process whose session is tracked by t: group members left
//	    running, double forks (`( ( sleep 1000 & ) & )`) and
//	    `nohup … & disown`, which keep their session, and the sessions of
//	    escapees attributed to t's commands (see Tracker);
//	(b) every escapee nobody owns: a direct child of this process that is
//	    not claimed, not in this process's group or session, and not in a
//	    tracked session. That is a process that left its session (setsid)
//	    and was re-parented to us before it could be attributed. ANY
//	    tracker's KillAll takes every such escapee of the process, but
//	    for the daemons SpareDaemons spares;
//	(c) every descendant of a process in (a) or (b).
//
// Only descendants of this process are ever signalled (a tracked session
// id that was reused outside our tree is left alone), each by pid through
// Signal, so a pid reused meanwhile is never hit. Without BecomeSubreaper,
// a member whose parent exited is re-parented to init, is no longer our
// descendant, and is out of reach.
//
// Each round scans /proc afresh: SIGTERM goes to every process once, as
// it is found; after grace, SIGKILL goes to everything still alive, again
// each round, so processes forked meanwhile are caught too. A process
// that forks and exits in a loop is never seen alive by a scan, but the
// zombies it leaves are our children and stay put: the kill keeps one of
// them unreaped per process group (so the group id cannot be reused) and
// signals the whole group through it. KillAll returns when two scans in a
// row find nothing alive, or when KillWait has passed after grace; the
// groups it holds get SIGKILL then in any case, since a scan that finds
// nothing does not prove them empty. The sessions it took are then
// forgotten; Add may be called again afterwards, but a session added while
// KillAll runs may survive it.
func (t *Tracker) KillAll(grace time.Duration) { t.kill(grace, scope{all: true}) }

// KillOwner is KillAll for what the commands added for owner left: their
// sessions (a), their descendants (c), but no escapee nobody owns (b).
func (t *Tracker) KillOwner(owner string, grace time.Duration) {
	t.kill(grace, scope{byOwner: true, owner: owner})
}

// KillCommand is KillAll for what the command added as sid left outside
// its own process group (which its caller stops with Terminate, at the
// same time): the rest of its session, the sessions of escapees
// attributed to it, and their descendants.
//
// groupGone, when not nil, is closed by the caller once the group is
// gone (Terminate returned): the group may make more leftovers while it
// dies, so KillCommand then returns only when two scans in a row that
// started after groupGone was closed found nothing, or when KillWait has
// passed since. A kill that runs alongside Terminate so takes everything,
// and none has to follow it (each would cost two scans more).
func (t *Tracker) KillCommand(sid int, grace time.Duration, groupGone <-chan struct{}) {
	t.kill(grace, scope{root: sid, skipGroup: sid, groupGone: groupGone})
}

// MayHaveLeftovers reports whether the command added as sid may have left
// something outside its process group for KillCommand to take; false is
// a promise only for the moment of the call. It reads the children of
// the command's shell tree and of this process rather than all of /proc,
// so a kill of a command that left nothing does not cost a scan.
func (t *Tracker) MayHaveLeftovers(sid int) bool {
	registry.mu.Lock()
	for id, e := range registry.sessions {
		if e.tracker == t && e.root == sid && id != sid {
			registry.mu.Unlock()
			return true // escapees already attributed to it
		}
	}
	registry.mu.Unlock()
	// A process of the shell's tree outside its group.
	queue := []int{sid}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		kids, err := children(pid)
		if err != nil {
			return true
		}
		for _, k := range kids {
			if p, err := Stat(k); err == nil && p.Pgid != sid {
				return true
			}
		}
		queue = append(queue, kids...)
	}
	// An escapee re-parented to us that nobody owns yet, or that is its.
	adopted, err := orphans()
	if err != nil {
		return true
	}
	var unowned []int
	registry.mu.Lock()
	for _, p := range adopted {
		switch e := registry.sessions[p.Sid]; {
		case e == nil:
			unowned = append(unowned, p.Pid)
		case e.tracker == t && e.root == sid:
			registry.mu.Unlock()
			return true
		}
	}
	registry.mu.Unlock()
	if len(unowned) == 0 {
		return false
	}
	// The listing took no lock, so an unowned child may be a shell the
	// main thread is spawning, forked (in its own session) but not yet
	// claimed: taken for an escapee, it would send the kill to the slow
	// path (583 of 650 kills in TestConcurrentSessions' soak did, while
	// other sessions spawned). So wait for the spawns under way to claim
	// theirs (forkMu: no scan of /proc holds it) and look again.
	forkMu.Lock()
	defer forkMu.Unlock()
	return slices.ContainsFunc(unowned, func(k int) bool { return !isClaimed(k) })
}

// reparented lists the children of this process's main thread: every
// process re-parented to us (we are a subreaper or a namespace's init),
// and the children the main thread forked. The kernel gives an orphan to
// the first live thread of its new parent in thread-list order, the
// thread-group leader, which the Go runtime never ends (find_new_reaper
// in kernel/exit.c). The children of our other threads are not read: a
// server running a thousand commands has about as many threads (each
// waits for its shell), and reading all their children files cost as
// much as a scan of /proc. Those children are the ones we forked, which
// never leave our tree without going through the main thread's list.
func reparented() ([]int, error) {
	self := strconv.Itoa(os.Getpid())
	b, err := os.ReadFile("/proc/" + self + "/task/" + self + "/children")
	if err != nil {
		return nil, err
	}
	return parsePids(b), nil
}

// orphans returns the processes re-parented to us (see reparented) that
// are neither claimed nor in our process group: those that no one else
// waits for. A child that cannot be read is left out (it is gone), and so
// is a live daemon SpareDaemons spares (its zombie is not: it is reaped).
func orphans() ([]Info, error) {
	kids, err := reparented()
	if err != nil {
		return nil, err
	}
	selfPgid := unix.Getpgrp()
	var out []Info
	for _, k := range kids {
		if isClaimed(k) {
			continue
		}
		if p, err := Stat(k); err == nil && p.Pgid != selfPgid && !(p.Alive() && isSpared(k)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePids(b []byte) []int {
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if k, err := strconv.Atoi(f); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// children lists the children of pid, from the children file of each of
// its threads (Linux 3.5 and later, CONFIG_PROC_CHILDREN).
func children(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tids, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil // gone: no children
		}
		return nil, err
	}
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + "/" + tid.Name() + "/children")
		if err != nil {
			if os.IsNotExist(err) {
				if _, serr := os.Stat(dir + "/" + tid.Name()); serr == nil {
					return nil, err // no children files in this kernel
				}
			}
			continue // the thread went
		}
		out = append(out, parsePids(b)...)
	}
	return out, nil
}

// maxHeld bounds the zombies one kill keeps unreaped, one per process
// group (a loop that makes a new group at every fork must not fill the
// pid table with them).
const maxHeld = 64

func (t *Tracker) kill(grace time.Duration, sc scope) {
	self := os.Getpid()
	if sc.byOwner || sc.all {
		if nothingToTake(t, sc, self) {
			return
		}
	}
	termUntil := time.Now().Add(grace)
	giveUpAt := termUntil.Add(KillWait)
	termed := make(map[Info]bool)
	held := make(map[int]int) // pgid → the zombie of ours that holds it
	termedGroups := make(map[int]bool)
	taken := make(map[int]bool)
	defer release(held)
	empty := 0
	delay := firstPoll
	for {
		// Only scans that start after the group is gone count for the
		// end; the deadline then leaves them KillWait.
		waiting := false
		if sc.groupGone != nil {
			select {
			case <-sc.groupGone:
				sc.groupGone = nil
				if d := time.Now().Add(KillWait); d.After(giveUpAt) {
					giveUpAt = d
				}
			default:
				waiting = true
			}
		}
		targets, seen := t.collect(self, sc, held, taken)
		// A scan that failed (/proc unreadable: no descriptor left, say)
		// saw nothing and proves nothing gone: only the deadline ends
		// a kill that cannot look.
		if len(targets) == 0 && seen && !waiting {
			empty++
		} else {
			empty = 0
		}
		now := time.Now()
		last := empty >= 2 || !waiting && !now.Before(giveUpAt)
		kill := last || !now.Before(termUntil)
		for pgid := range held {
			switch {
			case kill:
				unix.Kill(-pgid, unix.SIGKILL)
			case !termedGroups[pgid]:
				termedGroups[pgid] = true
				unix.Kill(-pgid, unix.SIGTERM)
			}
		}
		for _, p := range targets {
			switch {
			case kill:
				Signal(p, unix.SIGKILL)
			case !termed[key(p)]:
				termed[key(p)] = true
				Signal(p, unix.SIGTERM)
			}
		}
		if last {
			break
		}
		time.Sleep(delay)
		if len(targets) > 0 {
			delay = min(2*delay, maxPoll)
		}
	}
	t.forget(taken)
}

// nothingToTake reports whether a kill of all, or of an owner's, in
// scope sc would find nothing, known without a scan of /proc: t tracks
// no session it takes, and (for a kill of all, which also takes the
// orphans re-parented to this process) this process has no child at
// all. Every orphan re-parented to this process is its child, and a
// kill of all takes only them, their descendants and t's sessions. A
// contained executor's tracker tracks nothing (its commands are its
// inits'), and its inits are reaped before its end: its session's end
// and its close then cost no scan (two scans and a poll, 4-6 ms here).
func nothingToTake(t *Tracker, sc scope, self int) bool {
	registry.mu.Lock()
	for _, e := range registry.sessions {
		if e.tracker == t && sc.match(e) {
			registry.mu.Unlock()
			return false
		}
	}
	registry.mu.Unlock()
	if !sc.all {
		return true
	}
	kids, err := children(self)
	return err == nil && len(kids) == 0
}

// key is the identity of a process for "signalled already": pid and start
// time, nothing that changes while it runs.
func key(p Info) Info { return Info{Pid: p.Pid, StartTime: p.StartTime} }

// collect waits for a scan of /proc in a round of killScans (which
// attributes escapees, see Tracker, and reaps what is reapable) and
// returns the live processes that t's kill in scope sc takes (see
// KillAll). Zombie children of ours among them are kept unreaped, one per
// process group, in held (pgid → pid); the sessions taken are added to
// taken. seen is false when the scan failed.
func (t *Tracker) collect(self int, sc scope, held map[int]int, taken map[int]bool) (out []Info, seen bool) {
	killScans.do(func(s *snapshot) {
		if seen = s.err == nil; seen {
			out = t.collectLocked(s, self, sc, held, taken)
		}
	})
	return out, seen
}

// collectLocked is collect's look at scan s; spawnMu is held.
func (t *Tracker) collectLocked(s *snapshot, self int, sc scope, held map[int]int, taken map[int]bool) []Info {
	selfPgid := unix.Getpgrp()
	selfSid, _ := unix.Getsid(0)
	// The kill takes our descendants in the sessions it takes and, for
	// a kill of all, the escapees nobody owns; they and everything below
	// them belong to it. Each kill looks only at those: a round of
	// killScans serves hundreds of kills at once.
	sids := t.sessionsFor(sc)
	var queue []int
	for sid, take := range sids {
		if take {
			taken[sid] = true
			queue = append(queue, s.inSession(self, sid)...)
		}
	}
	if sc.all {
		for _, i := range s.children(self) {
			p := s.infos[i]
			if _, tracked := sids[p.Sid]; !tracked && p.Pgid != selfPgid && p.Sid != selfSid && !isClaimed(p.Pid) && !isSpared(p.Pid) {
				queue = append(queue, i)
			}
		}
	}
	in := make(map[int]bool) // indices into s.infos that belong to the kill
	var out []Info
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		if in[i] {
			continue
		}
		in[i] = true
		p := s.infos[i]
		if p.PPid == self && p.Alive() && !isClaimed(p.Pid) && isSpared(p.Pid) {
			// A daemon SpareDaemons spares, and what it runs, though its
			// session was charged to a command: a scan met it before
			// its exec made it the daemon (a shell, or the middle of the
			// exec), and a session's charge is for good. Not a command's
			// own shell (claimed), whatever it runs.
			continue
		}
		switch {
		case p.Pgid == sc.skipGroup:
		case p.Alive():
			out = append(out, p)
		case p.PPid == self && p.State == 'Z' && p.Pgid != selfPgid && !isClaimed(p.Pid):
			if _, ok := held[p.Pgid]; !ok && len(held) < maxHeld {
				held[p.Pgid] = p.Pid
				pinned[p.Pid]++
			}
		}
		queue = append(queue, s.children(p.Pid)...)
	}
	// Parents are signalled before their children (the sessions above
	// are walked in map order): a shell in `wait` whose child died first
	// would exit 0 before its own signal came, as if it had ended well.
	// A parent starts no later than its child; pids break the tie.
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(cmp.Compare(a.StartTime, b.StartTime), cmp.Compare(a.Pid, b.Pid))
	})
	return out
}

// release lets the orphan reaper have the zombies a kill held, and reaps
// them.
func release(held map[int]int) {
	if len(held) == 0 {
		return
	}
	spawnMu.Lock()
	for _, pid := range held {
		if pinned[pid] <= 1 {
			delete(pinned, pid)
		} else {
			pinned[pid]--
		}
	}
	spawnMu.Unlock()
	reapOrphans()
}

// attributeLocked tracks the session of every live descendant of this
// process (and zombie child) that is in no tracked session, for the command and owner it
// came from: the session of its nearest ancestor that is in a tracked
// session or, for an ancestor re-parented to us (a direct child, not
// claimed, not in our group), the one command, or the one owner, whose
// shell ran when that ancestor started. spawnMu must be held; infos must
// have been read under it.
func attributeLocked(infos []Info, self, selfPgid, selfSid int) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if len(registry.sessions) == 0 {
		return
	}
	idx := make(map[int]int, len(infos))
	var latest uint64 // the latest start time of the scan
	for i, p := range infos {
		idx[p.Pid] = i
		latest = max(latest, p.StartTime)
	}
	dropStaleLocked(infos, idx)
	memo := make(map[int]*sessionEntry) // pid → what it belongs to; nil: nothing
	var path []int
	for _, p := range infos {
		// A zombie child of ours counts: it stays put until reaped, and
		// it is all a scan sees of a process that forks in a loop.
		zombieChild := p.State == 'Z' && p.PPid == self
		if !p.Alive() && !zombieChild || p.Sid == selfSid || registry.sessions[p.Sid] != nil {
			continue
		}
		path = path[:0]
		var from *sessionEntry
		for q, n := p, 0; n < len(infos); n++ {
			if e, ok := memo[q.Pid]; ok {
				from = e
				break
			}
			path = append(path, q.Pid)
			if e := registry.sessions[q.Sid]; e != nil {
				from = e
				break
			}
			if q.PPid == self {
				if q.Pgid != selfPgid && !isClaimed(q.Pid) && !isSpared(q.Pid) {
					from = startedDuring(q.StartTime)
				}
				break
			}
			i, ok := idx[q.PPid]
			if !ok {
				break // not our descendant, or its parent went during the scan
			}
			q = infos[i]
		}
		for _, pid := range path {
			memo[pid] = from
		}
		if from != nil {
			registry.seq++
			e := &sessionEntry{tracker: from.tracker, owner: from.owner, root: from.root, seq: registry.seq}
			if i, ok := idx[p.Sid]; ok {
				e.leader = infos[i].StartTime
			} else {
				e.leaderGone = latest
			}
			registry.sessions[p.Sid] = e
		}
	}
}

// dropStaleLocked forgets the tracked sessions whose id is now the pid
// of a process that started at another time than their leader did, or,
// when their leader had exited before the entry was made, after the
// scan that made it (sessionEntry.leaderGone). The
// kernel reuses a pid only once no process has it as its session id, so
// such a session has no member left, and the session of that id now is
// another command's: a kill of the stale entry's owner would take it
// (between a command's spawn and its Add, or for good, an escapee's),
// and its own owner's would not. registry.mu must be held; idx maps
// pids to infos.
func dropStaleLocked(infos []Info, idx map[int]int) {
	for sid, e := range registry.sessions {
		i, ok := idx[sid]
		if !ok {
			continue
		}
		if e.leader != 0 && infos[i].StartTime != e.leader || e.leader == 0 && e.leaderGone != 0 && infos[i].StartTime > e.leaderGone {
			delete(registry.sessions, sid)
		}
	}
}

// startedDuring returns the entry of the command whose shell ran at
// start (clock ticks since boot), when exactly one did; an entry without a
// command (root 0) when several did, all for one owner of one tracker;
// else nil. registry.mu must be held.
func startedDuring(start uint64) *sessionEntry {
	var found *sessionEntry
	for sid, e := range registry.sessions {
		if e.root != sid || e.start == 0 || start < e.start || e.end != 0 && start > e.end {
			continue
		}
		switch {
		case found == nil:
			found = e
		case found.tracker != e.tracker || found.owner != e.owner:
			return nil
		case found.root != e.root:
			found = &sessionEntry{tracker: e.tracker, owner: e.owner}
		}
	}
	return found
}
