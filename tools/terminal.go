package tools

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// terminalHandle adapts a command running on a terminal into a task: its
// reads are what the terminal shows (the screen, or the lines added since
// the previous read), and it takes input.
type terminalHandle struct {
	t         shell.Terminal
	budget    int
	cancelled atomic.Bool
	timedOut  atomic.Bool   // the call's timeout killed it
	timeout   time.Duration // the call's timeout, once armed

	mu      sync.Mutex
	answer  string // the read Input took, for the next Read
	pending bool
}

var _ tasks.Handle = (*terminalHandle)(nil)

// newTerminalHandle makes t a task the runtime can own; each read is held
// to budget bytes, keeping its end (the screen's bottom, the newest
// lines).
func newTerminalHandle(t shell.Terminal, budget int) *terminalHandle {
	return &terminalHandle{t: t, budget: budget}
}

// Read returns what the terminal shows since the previous read (what an
// Input waited for first), within the budget.
func (h *terminalHandle) Read() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.t.Read()
	if h.pending {
		// The program answered while Input waited; anything later follows.
		s, h.answer, h.pending = h.answer+s, "", false
	}
	return h.fit(s)
}

// Peek returns the end of the screen, at most maxBytes bytes.
func (h *terminalHandle) Peek(maxBytes int) string { return h.t.Peek(min(maxBytes, h.budget)) }

// Written is the bytes the program has written so far.
func (h *terminalHandle) Written() int64 { return h.t.Written() }

// Cancel kills the program and its session (SIGTERM, SIGKILL after the
// grace).
func (h *terminalHandle) Cancel(string) {
	h.cancelled.Store(true)
	h.t.Kill()
}

// Done is closed once the program ended and the terminal is released.
func (h *terminalHandle) Done() <-chan struct{} { return h.t.Done() }

// expire arms the timeout of the call the terminal moved from: after
// left, the program and its session are killed, and the outcome says it
// timed out after timeout (the call's whole timeout, counted from its
// start, as for a yielded command). It is called once, before the handle
// is shared; the timer goes when the terminal ends first, so no kill can
// reach a session whose ids were reused.
func (h *terminalHandle) expire(left, timeout time.Duration) {
	h.timeout = timeout
	timer := time.NewTimer(left)
	go func() {
		defer timer.Stop()
		select {
		case <-h.t.Done():
		case <-timer.C:
			h.timedOut.Store(true)
			h.t.Kill()
		}
	}()
}

// Outcome is how the program ended: killed when cancelled, timed out or
// ended by a signal, completed otherwise, whatever its exit code.
func (h *terminalHandle) Outcome() tasks.Outcome {
	code, sig := h.t.Exit()
	out := tasks.Outcome{Status: tasks.StatusCompleted, ExitCode: code, Signal: sig}
	if sig != "" || h.cancelled.Load() {
		out.Status = tasks.StatusKilled
	}
	if h.timedOut.Load() && out.Status == tasks.StatusKilled {
		out.TimedOut, out.Timeout = true, h.timeout
	}
	return out
}

// Input types text, presses keys and waits for the program's answer as
// shell.Terminal.Input does; the answer is what the next Read returns
// first, so that the task runtime's read (and its bookkeeping) delivers
// it. It fails, sending nothing, when a key is unknown or the program has
// ended. Reads wait until it is over, so they never show output ahead of
// the answer, and inputs never interleave.
func (h *terminalHandle) Input(text string, keys []string, wait time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	out, err := h.t.Input(text, keys, wait)
	if err != nil {
		return err
	}
	h.answer += out
	h.pending = true
	return nil
}

// fit keeps the end of a read that is over the budget, from a line start
// when one lies near the cut.
func (h *terminalHandle) fit(s string) string {
	if len(s) <= h.budget {
		return s
	}
	return s[tailStart(s, h.budget, false):]
}
