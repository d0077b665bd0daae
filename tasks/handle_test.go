package tasks

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// handle is an in-test producer: real channels, output pushed by emit, ended
// by finish. It ignores Cancel unless a goroutine (see stopOnCancel) acts on
// it, so a test can hold a task in "stopping" for as long as it needs.
type handle struct {
	mu       sync.Mutex
	pending  strings.Builder
	emitted  strings.Builder
	outcome  Outcome
	reasons  []string
	finished bool

	cancel chan struct{} // closed by the first Cancel
	done   chan struct{}
}

func newHandle() *handle {
	return &handle{cancel: make(chan struct{}), done: make(chan struct{})}
}

func (h *handle) emit(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		panic("emit after finish")
	}
	h.pending.WriteString(s)
	h.emitted.WriteString(s)
}

// finish ends the work with o; only the first call counts.
func (h *handle) finish(o Outcome) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finished {
		return false
	}
	h.finished = true
	h.outcome = o
	close(h.done)
	return true
}

// setOutcome changes what Outcome reports, even after finish (to check that
// the runtime keeps the first settlement).
func (h *handle) setOutcome(o Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcome = o
}

func (h *handle) all() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.emitted.String()
}

func (h *handle) cancelReasons() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.reasons...)
}

func (h *handle) Read() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.pending.String()
	h.pending.Reset()
	return s
}

// Peek returns the end of what Read would return, at most maxBytes,
// starting at a line when one starts within it.
func (h *handle) Peek(maxBytes int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.pending.String()
	if len(s) <= maxBytes {
		return s
	}
	s = s[len(s)-maxBytes:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return s
}

func (h *handle) Written() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(h.emitted.Len())
}

func (h *handle) Cancel(reason string) {
	h.mu.Lock()
	h.reasons = append(h.reasons, reason)
	first := len(h.reasons) == 1
	h.mu.Unlock()
	if first {
		close(h.cancel)
	}
}

func (h *handle) Done() <-chan struct{} { return h.done }

func (h *handle) Outcome() Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outcome
}

var (
	exit0   = Outcome{Status: StatusCompleted, ExitCode: intp(0)}
	exit3   = Outcome{Status: StatusCompleted, ExitCode: intp(3)}
	sigterm = Outcome{Status: StatusKilled, Signal: "SIGTERM"}
)

func intp(n int) *int { return &n }

// stopOnCancel ends h as killed by SIGTERM, grace after its first Cancel (or
// returns when h finished on its own).
func stopOnCancel(h *handle, grace time.Duration) {
	go func() {
		select {
		case <-h.cancel:
			if grace > 0 {
				time.Sleep(grace)
			}
			h.finish(sigterm)
		case <-h.done:
		}
	}()
}

// newRuntime returns a Runtime closed when t ends, after every handle the
// test made has been finished (cleanups run last-in first-out).
func newRuntime(t testing.TB, opts *Options) *Runtime {
	t.Helper()
	r := New(opts)
	t.Cleanup(r.Close)
	return r
}

// startManual starts a task whose handle ends only when the test says so
// (finished as killed at cleanup, if still running).
func startManual(t testing.TB, r *Runtime, owner, kind, label string) (*handle, Info) {
	t.Helper()
	h := newHandle()
	info, err := r.Start(owner, kind, label, func() (Handle, error) { return h, nil })
	if err != nil {
		t.Fatalf("Start(%q, %q, %q): %v", owner, kind, label, err)
	}
	t.Cleanup(func() { h.finish(sigterm) })
	return h, info
}

// startKillable starts a task whose handle ends (killed) as soon as it is
// cancelled.
func startKillable(t testing.TB, r *Runtime, owner, kind, label string) (*handle, Info) {
	t.Helper()
	h := newHandle()
	stopOnCancel(h, 0)
	info, err := r.Start(owner, kind, label, func() (Handle, error) { return h, nil })
	if err != nil {
		h.finish(sigterm)
		t.Fatalf("Start(%q, %q, %q): %v", owner, kind, label, err)
	}
	t.Cleanup(func() { h.finish(sigterm) })
	return h, info
}

// settle waits until the runtime has settled id (not just until the handle
// is done) and returns its snapshot.
func settle(t testing.TB, r *Runtime, owner, id string) Info {
	t.Helper()
	info, err := r.Wait(t.Context(), owner, id, 10*time.Second)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	if !info.Status.Settled() {
		t.Fatalf("Wait(%s): still %s after 10s", id, info.Status)
	}
	return info
}
