package tools

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tasks"
)

// TerminalHandle adapts a command running on a terminal into a task: its
// reads are what the terminal shows (the screen, or the lines added since
// the previous read), and it takes input.
type TerminalHandle struct {
	t         shell.Terminal
	budget    int
	cancelled atomic.Bool

	mu      sync.Mutex
	answer  string // the read Input took, for the next Read
	pending bool
}

var _ tasks.Handle = (*TerminalHandle)(nil)

// NewTerminalHandle makes t a task the runtime can own; each read is held
// to budget bytes, keeping its end (the screen's bottom, the newest
// lines).
func NewTerminalHandle(t shell.Terminal, budget int) *TerminalHandle {
	return &TerminalHandle{t: t, budget: budget}
}

// Read returns what the terminal shows since the previous read (what an
// Input waited for first), within the budget.
func (h *TerminalHandle) Read() string {
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
func (h *TerminalHandle) Peek(maxBytes int) string { return h.t.Peek(min(maxBytes, h.budget)) }

// Written is the bytes the program has written so far.
func (h *TerminalHandle) Written() int64 { return h.t.Written() }

// Cancel kills the program and its session (SIGTERM, SIGKILL after the
// grace).
func (h *TerminalHandle) Cancel(string) {
	h.cancelled.Store(true)
	h.t.Kill()
}

// Done is closed once the program ended and the terminal is released.
func (h *TerminalHandle) Done() <-chan struct{} { return h.t.Done() }

// Outcome is how the program ended: killed when cancelled or ended by a
// signal, completed otherwise, whatever its exit code.
func (h *TerminalHandle) Outcome() tasks.Outcome {
	code, sig := h.t.Exit()
	out := tasks.Outcome{Status: tasks.StatusCompleted, ExitCode: code, Signal: sig}
	if sig != "" || h.cancelled.Load() {
		out.Status = tasks.StatusKilled
	}
	return out
}

// Input types text, presses keys and waits for the program's answer as
// shell.Terminal.Input does; the answer is what the next Read returns
// first, so that the task runtime's read (and its bookkeeping) delivers
// it. It fails, sending nothing, when a key is unknown or the program has
// ended. Reads wait until it is over, so they never show output ahead of
// the answer, and inputs never interleave.
func (h *TerminalHandle) Input(text string, keys []string, wait time.Duration) error {
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
func (h *TerminalHandle) fit(s string) string {
	if len(s) <= h.budget {
		return s
	}
	return s[tailStart(s, h.budget, false):]
}
