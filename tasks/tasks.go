package tasks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
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

// Outcome is how a task settled: Status plus a detail such as
// "exit code: 0", "signal: SIGTERM" or "killed before exit".
type Outcome struct {
	Status Status
	Detail string
}

// StatusLine renders "[status: <status>]" or, when Detail is set,
// "[status: <status>, <detail>]".
func (o Outcome) StatusLine() string {
	if o.Detail == "" {
		return "[status: " + string(o.Status) + "]"
	}
	return "[status: " + string(o.Status) + ", " + o.Detail + "]"
}

// Handle is what a producer gives the runtime for one piece of background
// work. Its methods must be safe for concurrent use.
type Handle interface {
	// Read consumes and returns the output produced since the previous
	// Read, already rendered for a model (a producer that dropped output
	// appends its own lossy notice). With nothing new it returns "". Once
	// Done is closed, Read returns everything that is left.
	Read() string
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
}

// DefaultMaxPerSession is the limit used when Options.MaxPerSession is not
// set.
const DefaultMaxPerSession = 10

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
	Started time.Time
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

// UnknownTaskError reports an id that names no task (never started, or
// forgotten when its owner was disposed).
type UnknownTaskError struct{ ID string }

func (e *UnknownTaskError) Error() string { return "unknown task " + e.ID }

// ForeignTaskError reports a task that belongs to another owner.
type ForeignTaskError struct{ ID string }

func (e *ForeignTaskError) Error() string { return "task " + e.ID + " belongs to another session" }

// LimitError reports a Start refused because the owner already has Limit
// running-or-stopping tasks.
type LimitError struct{ Limit int }

func (e *LimitError) Error() string {
	return "background task limit reached for this session (limit: " + strconv.Itoa(e.Limit) +
		"); use task_kill to stop an unneeded task, wait for it to finish, then retry"
}

// Notice renders the completion notice of a settled task.
func Notice(info Info) string {
	return "background task " + info.ID + " (" + info.Kind + ": " + info.Label + ") finished " +
		info.Outcome.StatusLine() + ". Read its output with task_output."
}

// ownerDisposedReason is the Cancel reason of disposal.
const ownerDisposedReason = "owner disposed"

// Runtime runs background tasks for many owners. Create it with New; the
// zero value is not usable.
type Runtime struct {
	limit    int
	onNotice func(owner string)

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
	killRequested bool // Kill or disposal asked it to stop before it settled
	collected     bool // the owner read it after it settled
}

// New returns a Runtime. opts may be nil.
func New(opts *Options) *Runtime {
	r := &Runtime{
		limit:     DefaultMaxPerSession,
		ids:       make(map[string]*task),
		owners:    make(map[string]*owner),
		counters:  make(map[string]int),
		closeDone: make(chan struct{}),
	}
	if opts != nil {
		if opts.MaxPerSession > 0 {
			r.limit = opts.MaxPerSession
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
		started: time.Now(),
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
// that settles the task makes no notice for it.
func (r *Runtime) settle(t *task, collect bool) {
	o := t.owner
	out := normalize(t.h.Outcome())

	o.mu.Lock()
	if t.status.Settled() {
		o.mu.Unlock()
		return
	}
	t.status, t.outcome = out.Status, out
	t.collected = t.collected || collect
	o.active--
	notify := !t.killRequested && !o.disposed && !t.collected
	if notify {
		o.notices = append(o.notices, t)
	}
	close(t.settled)
	o.mu.Unlock()

	if notify && r.onNotice != nil {
		r.onNotice(o.name)
	}
}

// normalize turns a producer's outcome that is not settled into a failure.
func normalize(out Outcome) Outcome {
	if out.Status.Settled() {
		return out
	}
	detail := fmt.Sprintf("producer reported status %q at exit", out.Status)
	if out.Detail != "" {
		detail += " (" + out.Detail + ")"
	}
	return Outcome{Status: StatusFailed, Detail: detail}
}

// infoLocked snapshots t; t.owner.mu must be held.
func (t *task) infoLocked() Info {
	out := t.outcome
	if !t.status.Settled() {
		out = Outcome{Status: t.status}
	}
	return Info{
		ID:      t.id,
		Kind:    t.kind,
		Label:   t.label,
		Owner:   t.owner.name,
		Status:  t.status,
		Outcome: out,
		Started: t.started,
	}
}

func (t *task) info() Info {
	t.owner.mu.Lock()
	defer t.owner.mu.Unlock()
	return t.infoLocked()
}

// lookup finds id and checks that owner may touch it: an unknown id first,
// then a foreign one.
func (r *Runtime) lookup(owner, id string) (*task, error) {
	r.mu.RLock()
	t := r.ids[id]
	r.mu.RUnlock()
	if t == nil {
		return nil, &UnknownTaskError{ID: id}
	}
	if t.owner.name != owner {
		return nil, &ForeignTaskError{ID: id}
	}
	return t, nil
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
	r.mu.RLock()
	o := r.owners[owner]
	r.mu.RUnlock()
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.tasks) == 0 {
		return nil
	}
	infos := make([]Info, len(o.tasks))
	for i, t := range o.tasks {
		infos[i] = t.infoLocked()
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
	return info, info.Status.Settled(), nil
}

// Notices drains owner's pending completion notices, in settlement order.
// Each is "background task <id> (<kind>: <label>) finished <status line>.
// Read its output with task_output." It returns nil when none is pending.
func (r *Runtime) Notices(owner string) []string {
	r.mu.RLock()
	o := r.owners[owner]
	r.mu.RUnlock()
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, t := range o.notices {
		if !t.collected {
			out = append(out, Notice(t.infoLocked()))
		}
	}
	clear(o.notices)
	o.notices = o.notices[:0]
	return out
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
