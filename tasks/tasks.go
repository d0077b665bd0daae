package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Status is the life stage of a task.
type Status string

const (
	StatusRunning   Status = "running"   // started, no kill requested
	StatusStopping  Status = "stopping"  // Kill was requested; the work has not ended yet
	StatusCompleted Status = "completed" // ended on its own, whatever its exit code
	StatusKilled    Status = "killed"    // ended by a signal, a kill, or never really started
	StatusFailed    Status = "failed"    // the producer could not run or report the work
)

// Settled reports whether s is final: completed, killed or failed.
func (s Status) Settled() bool {
	return s == StatusCompleted || s == StatusKilled || s == StatusFailed
}

// Outcome is how a task settled. The facts are fields, so that every layer
// above reads them without parsing text; StatusLine renders them.
type Outcome struct {
	Status Status
	// ExitCode is the work's exit code when it exited; nil when it did
	// not (a signal ended it, or it never ran).
	ExitCode *int
	// Signal names the signal that ended the work ("SIGTERM", …), or "".
	Signal string
	// TimedOut reports that the work was stopped because its own timeout,
	// Timeout, passed (a command moved to the background keeps the
	// timeout it had in the foreground).
	TimedOut bool
	Timeout  time.Duration
	// Detail is any other fact in words, e.g. "killed before exit", or
	// why a producer failed; "" when the fields above say it all.
	Detail string
}

// Details renders the facts of o, joined by ", ", in this order: "timed
// out after <ms>ms", then "signal: <SIG>" or else "exit code: <N>", then
// Detail. It is "" when there is none.
func (o Outcome) Details() string {
	var parts []string
	if o.TimedOut {
		parts = append(parts, "timed out after "+strconv.FormatInt(o.Timeout.Milliseconds(), 10)+"ms")
	}
	switch {
	case o.Signal != "":
		parts = append(parts, "signal: "+o.Signal)
	case o.ExitCode != nil:
		parts = append(parts, "exit code: "+strconv.Itoa(*o.ExitCode))
	}
	if o.Detail != "" {
		parts = append(parts, o.Detail)
	}
	return strings.Join(parts, ", ")
}

// StatusLine renders "[status: <status>]" or, when there are details,
// "[status: <status>, <details>]", e.g. "[status: completed, exit code:
// 1]" or "[status: killed, timed out after 800ms, signal: SIGTERM]".
func (o Outcome) StatusLine() string {
	if d := o.Details(); d != "" {
		return "[status: " + string(o.Status) + ", " + d + "]"
	}
	return "[status: " + string(o.Status) + "]"
}

// Handle is what a producer gives the runtime for one piece of background
// work. Its methods must be safe for concurrent use.
type Handle interface {
	// Read consumes and returns the output produced since the previous
	// Read, already rendered for a model (a producer that dropped output
	// says so in its own words). With nothing new it returns "". Once
	// Done is closed, Read returns everything that is left.
	Read() string
	// Peek returns the end of what the next Read would return, without
	// consuming anything: at most maxBytes bytes, rendered like Read.
	// When it leaves the start out, the text begins at the start of a
	// line if one begins within it, else at a character boundary. It
	// feeds the "Last output" of completion notices.
	Peek(maxBytes int) string
	// Written reports how many bytes of output the work has produced so
	// far, read or not (for progress reports).
	Written() int64
	// Cancel asks the work to stop and returns at once; the work ends
	// later, and Done is closed then. It must end in bounded time (bash
	// escalates to SIGKILL after its grace): Dispose and Close wait for it.
	// Calling Cancel more than once, or after the work ended, is harmless.
	Cancel(reason string)
	// Done is closed when the work has really ended and its output is
	// complete.
	Done() <-chan struct{}
	// Outcome is valid once Done is closed; its Status is completed,
	// killed or failed (anything else settles the task as failed).
	Outcome() Outcome
}

// Begun is a Handle whose work began before its task did: a foreground
// command moved into a task because it ran long. The task's start
// (Info.Started, and so Info.Elapsed) is then Began, not the moment the
// task was made.
type Begun interface {
	Began() time.Time
}

// startOf is when the work of h began.
func startOf(h Handle) time.Time {
	if b, ok := h.(Begun); ok {
		if t := b.Began(); !t.IsZero() {
			return t
		}
	}
	return time.Now()
}

// Leftovers is implemented by Handles whose work can leave processes
// running after it ended (a bash command's background server, a fork
// loop; docs/tasks.md#leftovers). The runtime counts them whenever it
// snapshots a settled task, until a count finds none (none can come back
// then), and KillLeftovers ends them.
type Leftovers interface {
	// Leftovers counts the processes the work left running (0 when it
	// cannot tell). It is called only once Done is closed, outside the
	// runtime's locks.
	Leftovers() int
	// KillLeftovers kills them and returns once they are gone.
	KillLeftovers() error
}

// Options configures a Runtime. A nil *Options means all defaults.
type Options struct {
	// MaxPerSession bounds the running-or-stopping tasks of one owner
	// (starts in progress included). 0 or less means 10.
	MaxPerSession int

	// OnNotice, if set, is called when a completion notice becomes pending
	// for owner, so a transport can push it. It is called outside any lock
	// of the runtime, from the goroutine that settled the task (its
	// watcher, or a Kill that found the work already ended); the notice
	// stays pending until drained with Notices (and is withdrawn if
	// the owner collects the result first). OnNotice should return
	// promptly and must not call Dispose or Close: disposal waits for that
	// goroutine.
	OnNotice func(owner string)

	// MaxFinished bounds the settled tasks one owner keeps. 0 or less
	// means 100. Past it, a settled task is forgotten (its id becomes
	// unknown and the runtime drops its Handle): the oldest (in start
	// order) of those whose result the owner collected, else of those
	// with no notice pending, and only when every settled task still owes
	// its notice the oldest of those, whose notice is then dropped.
	MaxFinished int
}

// DefaultMaxPerSession is the limit used when Options.MaxPerSession is not
// set.
const DefaultMaxPerSession = 10

// DefaultMaxFinished is the limit used when Options.MaxFinished is not
// set.
const DefaultMaxFinished = 100

// The "Last output" of a notice is at most NoticeLines lines and
// NoticeBytes bytes of the output its owner has not read.
const (
	NoticeLines = 5
	NoticeBytes = 500
)

// Info is a snapshot of one task.
type Info struct {
	ID    string // "<kind>-<N>"
	Kind  string // the producer's kind, e.g. "bash"
	Label string // what the task runs, e.g. the command
	Owner string
	// Status is the status at the time of the snapshot.
	Status Status
	// Outcome is how the task settled once Status is settled. While the
	// task runs or stops, Outcome.Status equals Status and Outcome.Detail
	// is empty, so Outcome.StatusLine renders "[status: running]".
	Outcome Outcome
	// Started is when the task's work began (see Begun).
	Started time.Time
	// Elapsed is the task's run time: from its start to its settlement
	// once settled, else until the snapshot.
	Elapsed time.Duration
	// Written is how many bytes of output the task had produced at the
	// snapshot (Handle.Written).
	Written int64
	// Leftovers is how many processes the settled task's work had left
	// running at the snapshot (a Handle that is a Leftovers); 0 while it
	// runs.
	Leftovers int
}

// StatusLine renders the task's status line: Outcome.StatusLine, and
// for a settled task that left processes running, "; <N> processes it
// started are still running" before its closing bracket, e.g. "[status:
// completed, exit code: 0; 2 processes it started are still running]".
func (i Info) StatusLine() string {
	line := i.Outcome.StatusLine()
	if i.Leftovers == 0 {
		return line
	}
	return line[:len(line)-1] + "; " + strconv.Itoa(i.Leftovers) + " processes it started are still running]"
}

// Settled reports whether the task had settled when the snapshot was taken.
func (i Info) Settled() bool { return i.Status.Settled() }

// ErrWaitAborted is returned by Wait when its ctx is done first. Its text is
// exactly "wait aborted".
var ErrWaitAborted = errors.New("wait aborted")

// ErrClosed is returned by Start after Close, and by a Start that was in
// progress when Close began.
var ErrClosed = errors.New("tasks: runtime is closed")

// ErrOwnerDisposed is returned by a Start that was in progress when its
// owner was disposed; the work it started has been cancelled and awaited.
var ErrOwnerDisposed = errors.New("tasks: owner was disposed while the task was starting")

// UnknownTaskError reports an id that names no task of the caller: never
// started, forgotten when its owner was disposed, or forgotten to bound
// memory (Options.MaxFinished). Yours lists the caller's own task ids,
// newest first, at most maxListedIDs of them, so that a model that
// mistyped an id can find the right one.
type UnknownTaskError struct {
	ID    string
	Yours []string
}

// maxListedIDs bounds UnknownTaskError.Yours.
const maxListedIDs = 10

// Error is "unknown task <id>; your tasks: <id>, <id>" or "unknown task
// <id>; you have no background tasks".
func (e *UnknownTaskError) Error() string {
	if len(e.Yours) == 0 {
		return "unknown task " + e.ID + "; you have no background tasks"
	}
	return "unknown task " + e.ID + "; your tasks: " + strings.Join(e.Yours, ", ")
}

// ForeignTaskError reports a task that belongs to another owner.
type ForeignTaskError struct{ ID string }

func (e *ForeignTaskError) Error() string { return "task " + e.ID + " belongs to another session" }

// LimitError reports a Start refused because the owner already has Limit
// running-or-stopping tasks. Its text names no tool: the layer that offers
// tools adds how to free a slot.
type LimitError struct{ Limit int }

func (e *LimitError) Error() string {
	return "background task limit reached for this session (limit: " + strconv.Itoa(e.Limit) + ")"
}

// Notice is a completion notice: a task that settled on its own and whose
// result its owner has not collected. The layer that talks to a model
// words it.
type Notice struct {
	Info
	// LastOutput is the end of the output the owner has not read: at
	// most NoticeLines lines and NoticeBytes bytes, cut at a line (or,
	// in a longer line, a character) boundary, without a final newline;
	// "" when there is none.
	LastOutput string
}

// ownerDisposedReason is the Cancel reason of disposal.
const ownerDisposedReason = "owner disposed"

// Runtime runs background tasks for many owners. Create it with New; the
// zero value is not usable.
type Runtime struct {
	limit       int
	maxFinished int
	onNotice    func(owner string)

	// mu guards ids, owners, counters and closed. It is held for writing
	// only to register or forget tasks and owners; per-task calls hold it
	// for reading just long enough to find the task.
	mu       sync.RWMutex
	ids      map[string]*task
	owners   map[string]*owner
	counters map[string]int
	closed   bool

	// disposals counts Dispose calls still awaiting an owner, so that Close
	// also waits for owners it no longer finds in owners.
	disposals sync.WaitGroup
	closeOnce sync.Once
	closeDone chan struct{}
}

// owner is one session's index. Its mu guards every field below it and the
// mutable fields of its tasks.
type owner struct {
	name string

	mu       sync.Mutex
	tasks    []*task // start order
	active   int     // running + stopping tasks + starts in progress
	finished int     // settled tasks in tasks
	notices  []*task // pending notices, settlement order; collected ones are skipped
	disposed bool

	// starts counts Starts that reserved a slot and have not finished;
	// watchers counts live watcher goroutines. Both are only incremented
	// under mu while !disposed, so Dispose may Wait on them.
	starts   sync.WaitGroup
	watchers sync.WaitGroup
}

// task is the runtime's record of one Handle. The immutable fields are set
// before the task is published; the rest are guarded by owner.mu.
type task struct {
	id, kind, label string
	owner           *owner
	started         time.Time
	h               Handle
	settled         chan struct{} // closed when status becomes settled

	status        Status
	outcome       Outcome
	ended         time.Time // when it settled
	killRequested bool      // Kill or disposal asked it to stop before it settled
	collected     bool      // the owner read it after it settled
	noticePending bool      // in owner.notices and not yet drained
	// leftoversGone: a count found nothing the settled work left running
	// (none can come back).
	leftoversGone bool
	// forgotten: the owner forgot it (Options.MaxFinished). Its id leaves
	// the runtime's table a moment later, under the runtime's lock;
	// lookup checks this first, so that a task gone from List is gone
	// from every call at once.
	forgotten bool
}

// New returns a Runtime. opts may be nil.
func New(opts *Options) *Runtime {
	r := &Runtime{
		limit:       DefaultMaxPerSession,
		maxFinished: DefaultMaxFinished,
		ids:         make(map[string]*task),
		owners:      make(map[string]*owner),
		counters:    make(map[string]int),
		closeDone:   make(chan struct{}),
	}
	if opts != nil {
		if opts.MaxPerSession > 0 {
			r.limit = opts.MaxPerSession
		}
		if opts.MaxFinished > 0 {
			r.maxFinished = opts.MaxFinished
		}
		r.onNotice = opts.OnNotice
	}
	return r
}

// Limit reports the per-owner limit in effect.
func (r *Runtime) Limit() int { return r.limit }

// Start starts a task for owner. It reserves a slot under owner's limit
// (refusing with *LimitError, without calling start, when none is free),
// calls start outside the runtime's locks and, only if start succeeds,
// assigns the id "<kind>-<N>". A start that fails (or panics) releases the
// slot and consumes no number; its error is returned as is.
//
// Start fails with ErrClosed after Close. If owner is disposed (or the
// runtime closed) while start runs, the new Handle is cancelled with reason
// "owner disposed" and awaited, and Start returns ErrOwnerDisposed (or
// ErrClosed).
func (r *Runtime) Start(owner, kind, label string, start func() (Handle, error)) (Info, error) {
	o, err := r.reserve(owner)
	if err != nil {
		return Info{}, err
	}
	defer o.starts.Done()

	h, err := callStart(o, start)
	if err != nil {
		return Info{}, err
	}

	r.mu.Lock()
	o.mu.Lock()
	if o.disposed {
		o.active--
		closed := r.closed
		o.mu.Unlock()
		r.mu.Unlock()
		h.Cancel(ownerDisposedReason)
		<-h.Done()
		if closed {
			return Info{}, ErrClosed
		}
		return Info{}, ErrOwnerDisposed
	}
	r.counters[kind]++
	t := &task{
		id:      kind + "-" + strconv.Itoa(r.counters[kind]),
		kind:    kind,
		label:   label,
		owner:   o,
		started: startOf(h),
		h:       h,
		settled: make(chan struct{}),
		status:  StatusRunning,
	}
	r.ids[t.id] = t
	o.tasks = append(o.tasks, t)
	o.watchers.Add(1)
	info := t.infoLocked()
	o.mu.Unlock()
	r.mu.Unlock()

	go r.watch(t)
	return info, nil
}

// reserve finds or creates owner's index and takes one slot of its limit.
func (r *Runtime) reserve(name string) (*owner, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	o := r.owners[name]
	if o == nil {
		o = &owner{name: name}
		r.owners[name] = o
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active >= r.limit {
		return nil, &LimitError{Limit: r.limit}
	}
	o.active++
	o.starts.Add(1)
	return o, nil
}

// callStart runs start and releases o's reserved slot unless it returned a
// Handle, even if start panics.
func callStart(o *owner, start func() (Handle, error)) (h Handle, err error) {
	ok := false
	defer func() {
		if !ok {
			o.mu.Lock()
			o.active--
			o.mu.Unlock()
		}
	}()
	h, err = start()
	if err == nil && h == nil {
		err = errors.New("tasks: start returned neither a Handle nor an error")
	}
	ok = err == nil
	return h, err
}

// watch settles t once its work has ended.
func (r *Runtime) watch(t *task) {
	defer t.owner.watchers.Done()
	<-t.h.Done()
	r.settle(t, false)
}

// settleIfEnded settles t now if its work has already ended, so that a
// caller who acts on t (Read, Kill) sees what a watcher not yet scheduled
// would record: a task whose work is over is never reported running, nor
// "cancelled". collect is passed to settle.
func (r *Runtime) settleIfEnded(t *task, collect bool) {
	select {
	case <-t.h.Done():
		r.settle(t, collect)
	default:
	}
}

// settle records t's outcome; its Handle must be done. The first call wins
// (the watcher, or a caller that saw the work ended first). collect marks
// the result as collected by its owner in the same step, so that a Read
// that settles the task makes no notice for it. Settling may make the
// owner forget its oldest settled task (Options.MaxFinished).
func (r *Runtime) settle(t *task, collect bool) {
	o := t.owner
	o.mu.Lock()
	if t.status.Settled() {
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	// Outside the lock: a producer's Outcome may take its own locks.
	// Two callers may both get here; the lock below keeps the first.
	out := normalize(t.h.Outcome())
	now := time.Now()

	o.mu.Lock()
	if t.status.Settled() {
		o.mu.Unlock()
		return
	}
	t.status, t.outcome, t.ended = out.Status, out, now
	t.collected = t.collected || collect
	o.active--
	o.finished++
	notify := !t.killRequested && !o.disposed && !t.collected
	if notify {
		o.notices = append(o.notices, t)
		t.noticePending = true
	}
	close(t.settled)
	var forget []*task
	for o.finished > r.maxFinished && !o.disposed {
		forget = append(forget, o.forgetOldestLocked())
	}
	o.mu.Unlock()

	if len(forget) > 0 {
		r.mu.Lock()
		for _, f := range forget {
			if r.ids[f.id] == f {
				delete(r.ids, f.id)
			}
		}
		r.mu.Unlock()
	}
	if notify && r.onNotice != nil {
		r.onNotice(o.name)
	}
}

// forgetOldestLocked removes o's oldest settled task from its index, in
// the order of Options.MaxFinished, and returns it; o.mu must be held and
// o must have a settled task. Nothing of o refers to the task afterwards,
// so once its id leaves the runtime's table its Handle (and the output
// the Handle holds) can be freed.
func (o *owner) forgetOldestLocked() *task {
	victim := -1
	for rank := 0; victim < 0; rank++ {
		for i, t := range o.tasks {
			if t.status.Settled() && forgetRank(t) == rank {
				victim = i
				break
			}
		}
	}
	t := o.tasks[victim]
	// slices.Delete clears the freed slot, so no stale pointer keeps
	// the task alive.
	o.tasks = slices.Delete(o.tasks, victim, victim+1)
	o.finished--
	t.forgotten = true
	if t.noticePending {
		t.noticePending = false
		i := slices.Index(o.notices, t)
		o.notices = slices.Delete(o.notices, i, i+1)
	}
	return t
}

// forgetRank orders settled tasks for forgetting: collected ones first,
// then those whose notice is not pending, then the rest.
func forgetRank(t *task) int {
	switch {
	case t.collected:
		return 0
	case !t.noticePending:
		return 1
	}
	return 2
}

// normalize turns a producer's outcome that is not settled into a failure.
func normalize(out Outcome) Outcome {
	if out.Status.Settled() {
		return out
	}
	detail := fmt.Sprintf("producer reported status %q at exit", out.Status)
	if d := out.Details(); d != "" {
		detail += " (" + d + ")"
	}
	return Outcome{Status: StatusFailed, Detail: detail}
}

// infoLocked snapshots t; t.owner.mu must be held.
func (t *task) infoLocked() Info {
	info := Info{
		ID:      t.id,
		Kind:    t.kind,
		Label:   t.label,
		Owner:   t.owner.name,
		Status:  t.status,
		Outcome: t.outcome,
		Started: t.started,
		Written: t.h.Written(),
	}
	if t.status.Settled() {
		info.Elapsed = t.ended.Sub(t.started)
	} else {
		info.Outcome = Outcome{Status: t.status}
		info.Elapsed = time.Since(t.started)
	}
	return info
}

// info snapshots t, what it left running counted; t.owner.mu must not
// be held.
func (t *task) info() Info {
	t.owner.mu.Lock()
	info := t.infoLocked()
	t.owner.mu.Unlock()
	t.countLeftovers(&info)
	return info
}

// countLeftovers sets info.Leftovers, a snapshot of t, when t settled
// and its Handle can tell; t.owner.mu must not be held (a count may scan
// the process table).
func (t *task) countLeftovers(info *Info) {
	lo, ok := t.h.(Leftovers)
	if !ok || !info.Status.Settled() {
		return
	}
	o := t.owner
	o.mu.Lock()
	gone := t.leftoversGone
	o.mu.Unlock()
	if gone {
		return
	}
	info.Leftovers = lo.Leftovers()
	if info.Leftovers == 0 {
		o.mu.Lock()
		t.leftoversGone = true
		o.mu.Unlock()
	}
}

// lookup finds id and checks that owner may touch it: an unknown id first,
// then a foreign one.
func (r *Runtime) lookup(owner, id string) (*task, error) {
	r.mu.RLock()
	t := r.ids[id]
	o := r.owners[owner]
	r.mu.RUnlock()
	if t != nil {
		t.owner.mu.Lock()
		forgotten := t.forgotten
		t.owner.mu.Unlock()
		if forgotten {
			t = nil
		}
	}
	if t == nil {
		return nil, &UnknownTaskError{ID: id, Yours: o.newestIDs(maxListedIDs)}
	}
	if t.owner.name != owner {
		return nil, &ForeignTaskError{ID: id}
	}
	return t, nil
}

// ownerNamed returns the owner called name, or nil.
func (r *Runtime) ownerNamed(name string) *owner {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.owners[name]
}

// newestIDs returns the ids of o's tasks, newest first, at most n; nil
// for a nil o.
func (o *owner) newestIDs(n int) []string {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for i := len(o.tasks) - 1; i >= 0 && len(ids) < n; i-- {
		ids = append(ids, o.tasks[i].id)
	}
	return ids
}

// Get returns a snapshot of task id. It fails with *UnknownTaskError when no
// such task exists (checked first) and with *ForeignTaskError when it
// belongs to another owner.
func (r *Runtime) Get(owner, id string) (Info, error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return Info{}, err
	}
	return t.info(), nil
}

// Read consumes the output of task id produced since its previous read and
// returns it with the status at that moment. Work that has already ended is
// settled first (its read never says running), and the status is taken
// before the output is drained, so a settled status always comes with the
// complete rest of the output. A read by the owner of a settled task collects
// its result: its pending completion notice, if any, is withdrawn, and none
// will be made. Access errors are those of Get.
func (r *Runtime) Read(owner, id string) (delta string, info Info, err error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return "", Info{}, err
	}
	r.settleIfEnded(t, true)
	o := t.owner
	o.mu.Lock()
	info = t.infoLocked()
	if info.Status.Settled() {
		// Marked before draining: a Notices call racing this Read then
		// drops the notice for output this Read is about to deliver.
		t.collected = true
	}
	o.mu.Unlock()
	t.countLeftovers(&info)
	return t.h.Read(), info, nil
}

// Wait blocks until task id settles, timeout passes or ctx is done. A
// settled task or a timeout returns the current snapshot and a nil error;
// after a timeout the task keeps running. A ctx that is done first returns
// the current snapshot and ErrWaitAborted. A timeout of 0 or less means no
// timeout. Wait does not collect the result: only Read does. Access errors
// are those of Get.
func (r *Runtime) Wait(ctx context.Context, owner, id string, timeout time.Duration) (Info, error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return Info{}, err
	}
	select {
	case <-t.settled:
		return t.info(), nil
	default:
	}
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-t.settled:
		return t.info(), nil
	case <-expired:
		return t.info(), nil
	case <-ctx.Done():
		return t.info(), ErrWaitAborted
	}
}

// List returns owner's tasks in start order, settled ones included until the
// owner is disposed. It returns nil when owner has none.
func (r *Runtime) List(owner string) []Info {
	o := r.ownerNamed(owner)
	if o == nil {
		return nil
	}
	o.mu.Lock()
	if len(o.tasks) == 0 {
		o.mu.Unlock()
		return nil
	}
	list := slices.Clone(o.tasks)
	infos := make([]Info, len(list))
	for i, t := range list {
		infos[i] = t.infoLocked()
	}
	o.mu.Unlock()
	for i, t := range list {
		t.countLeftovers(&infos[i])
	}
	return infos
}

// Kill asks task id to stop. A running task gets Handle.Cancel(reason), turns
// stopping and Kill returns at once, without waiting for the work to end; it
// will make no completion notice. A stopping task is left as it is (the
// cancellation was already requested) and alreadyFinished is false. A
// settled task, or one whose work has already ended (it is settled then), is
// not touched (its unread output stays readable) and alreadyFinished is
// true. info is the snapshot after the call. Access errors are those of Get.
func (r *Runtime) Kill(owner, id, reason string) (info Info, alreadyFinished bool, err error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return Info{}, false, err
	}
	r.settleIfEnded(t, false)
	o := t.owner
	o.mu.Lock()
	cancel := t.status == StatusRunning
	if cancel {
		t.status = StatusStopping
		t.killRequested = true
	}
	info = t.infoLocked()
	o.mu.Unlock()
	if cancel {
		t.h.Cancel(reason)
	}
	t.countLeftovers(&info)
	return info, info.Status.Settled(), nil
}

// KillLeftovers kills what settled task id left running, when its
// Handle can (a Leftovers), and returns how many processes that was (0
// when none, or when the task has not settled: Kill stops a running task
// and what it started) and the snapshot after. Access errors are those
// of Get.
func (r *Runtime) KillLeftovers(owner, id string) (n int, info Info, err error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return 0, Info{}, err
	}
	r.settleIfEnded(t, false)
	info = t.info()
	lo, ok := t.h.(Leftovers)
	if !ok || info.Leftovers == 0 {
		return 0, info, nil
	}
	if err := lo.KillLeftovers(); err != nil {
		return 0, info, err
	}
	return info.Leftovers, t.info(), nil
}

// Notices drains owner's pending completion notices, in settlement order,
// each with the end of the output its owner has not read (Handle.Peek:
// nothing is consumed). It returns nil when none is pending.
func (r *Runtime) Notices(owner string) []Notice {
	o := r.ownerNamed(owner)
	if o == nil {
		return nil
	}
	o.mu.Lock()
	var out []Notice
	var handles []Handle
	var tasks []*task
	for _, t := range o.notices {
		t.noticePending = false
		if !t.collected {
			out = append(out, Notice{Info: t.infoLocked()})
			handles = append(handles, t.h)
			tasks = append(tasks, t)
		}
	}
	clear(o.notices)
	o.notices = o.notices[:0]
	o.mu.Unlock()
	for i, h := range handles {
		out[i].LastOutput = lastLines(h.Peek(NoticeBytes), NoticeLines, NoticeBytes)
		tasks[i].countLeftovers(&out[i].Info)
	}
	return out
}

// lastLines returns the end of text: its last n lines (a final newline
// does not start another), and of those at most maxBytes bytes, cut after
// a newline when one lies within them, else at a character boundary. The
// result has no final newline.
func lastLines(text string, n, maxBytes int) string {
	text = strings.TrimRight(text, "\n")
	start := len(text)
	for range n {
		i := strings.LastIndexByte(text[:start], '\n')
		if i < 0 {
			start = 0
			break
		}
		start = i
	}
	if start > 0 || strings.HasPrefix(text, "\n") {
		start++ // past the newline that ends the line before
	}
	if len(text)-start > maxBytes {
		cut := len(text) - maxBytes
		switch i := strings.IndexByte(text[cut:], '\n'); {
		case text[cut-1] == '\n': // a line starts there already
		case i >= 0:
			cut += i + 1
		default:
			for cut < len(text) && !utf8.RuneStart(text[cut]) {
				cut++
			}
		}
		start = cut
	}
	return text[start:]
}

// Dispose ends owner: every task of owner still running is cancelled with
// reason "owner disposed", all are awaited (concurrently) until their work
// has ended, and then they are forgotten (their ids become unknown). No
// notices are made for them and pending ones are dropped. A Start of owner
// in progress is awaited too (it cancels what it started). Dispose of an
// unknown owner is a no-op.
func (r *Runtime) Dispose(owner string) {
	r.mu.Lock()
	o := r.owners[owner]
	if o != nil {
		delete(r.owners, owner)
		r.disposals.Add(1)
	}
	r.mu.Unlock()
	if o == nil {
		return
	}
	defer r.disposals.Done()
	r.await(r.beginDispose(o))
}

// Close disposes every owner, concurrently (cancelling every running task
// first, then awaiting them all), and also waits for Dispose calls still in
// progress, so no work the runtime knows of and none of its goroutines
// outlive it. Start fails with ErrClosed afterwards. Close is idempotent; a
// second call waits for the first to finish.
func (r *Runtime) Close() {
	first := false
	r.closeOnce.Do(func() { first = true })
	if !first {
		<-r.closeDone
		return
	}
	defer close(r.closeDone)

	r.mu.Lock()
	r.closed = true
	owners := make([]*owner, 0, len(r.owners))
	for _, o := range r.owners {
		owners = append(owners, o)
	}
	clear(r.owners)
	r.mu.Unlock()

	disposing := make([]*owner, 0, len(owners))
	for _, o := range owners {
		disposing = append(disposing, r.beginDispose(o))
	}
	for _, o := range disposing {
		r.await(o)
	}
	r.disposals.Wait()
}

// beginDispose marks o disposed and cancels its running tasks without
// waiting.
func (r *Runtime) beginDispose(o *owner) *owner {
	o.mu.Lock()
	o.disposed = true
	clear(o.notices)
	o.notices = nil
	var cancel []*task
	for _, t := range o.tasks {
		if t.status == StatusRunning {
			t.status = StatusStopping
			t.killRequested = true
			cancel = append(cancel, t)
		}
	}
	o.mu.Unlock()
	for _, t := range cancel {
		t.h.Cancel(ownerDisposedReason)
	}
	return o
}

// await waits for o's starts in progress and watchers, then forgets its tasks.
func (r *Runtime) await(o *owner) {
	o.starts.Wait()
	o.watchers.Wait()

	o.mu.Lock()
	tasks := o.tasks
	o.tasks = nil
	o.mu.Unlock()

	r.mu.Lock()
	for _, t := range tasks {
		if r.ids[t.id] == t {
			delete(r.ids, t.id)
		}
	}
	r.mu.Unlock()
}
