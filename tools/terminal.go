package tools

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conch-dev/conch/internal/term"
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
	began     time.Time     // when a call moved to a task started (tasks.Begun)

	endShown atomic.Bool // the read after the end showed the provider's markers

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
// Input waited for first), within the budget; a read that lost text
// names the raw stream's spill file (see fitTerminal).
func (h *terminalHandle) Read() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var markers []string
	if ended(h.t) && !h.endShown.Swap(true) {
		// The first read after the end shows what the provider found
		// (the sandbox's markers), once, as a piped task's does.
		markers = h.notes()
	}
	s := h.t.Read()
	if h.pending {
		// The program answered while Input waited; anything later follows.
		s, h.answer, h.pending = h.answer+s, "", false
	}
	s = fitTerminal(h.t, s, h.budget, markers...)
	if len(markers) == 0 {
		return s
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return s + strings.Join(markers, "\n")
}

// notes are the provider's markers for the ended program.
func (h *terminalHandle) notes() []string {
	if f, ok := h.t.(shell.TerminalFindings); ok {
		notes, _ := f.Findings()
		return notes
	}
	return nil
}

// Sandbox is the sandbox the program ran under and what it denied, once
// it ended; nil before, or when it ran without one.
func (h *terminalHandle) Sandbox() *shell.SandboxReport {
	f, ok := h.t.(shell.TerminalFindings)
	if !ok || !ended(h.t) {
		return nil
	}
	_, sb := f.Findings()
	return sb
}

// Began is when the command started, for a foreground call moved to a
// task (tasks.Begun); zero otherwise.
func (h *terminalHandle) Began() time.Time { return h.began }

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

// fitTerminal holds read, a read of tm, to budget bytes as JSON encodes
// them (encodedLen), ending with markers (none for a task's read). Where
// text was lost, the model is told where the whole output is, the raw
// stream's spill file (written as the program runs), or why there is
// none: a read over the budget is cut as any stream is, its cut line
// naming it, and the line that says lines scrolled away before the read
// names it too, "[… <N> lines scrolled away; full output: <path>]".
func fitTerminal(tm shell.Terminal, read string, budget int, markers ...string) string {
	if !scrolled(read) && encodedLen(withMarkers(read, markers...)) <= budget {
		return read
	}
	at := rawWhere(tm.Raw())
	return fitStreams(wholeStream(nameScrolled(read, at), at), wholeStream("", ""), budget, markers...).out
}

// rawWhere names the spill file of a terminal's raw stream, or says why
// there is none, as a cut line does.
func rawWhere(raw shell.Output) string {
	return where(HostPath(raw.Host, raw.SpillPath), raw.SpillErr, raw.Truncated)
}

// scrolled reports whether read starts with the line that says lines
// scrolled away before it (term.ScrolledAway).
func scrolled(read string) bool {
	line, _, _ := strings.Cut(read, "\n")
	return strings.HasPrefix(line, cutPrefix) && strings.HasSuffix(line, term.ScrolledSuffix)
}

// nameScrolled adds where the whole output is (at) to the line that says
// lines scrolled away before read, if read starts with one.
func nameScrolled(read, at string) string {
	if !scrolled(read) {
		return read
	}
	n := strings.IndexByte(read, '\n')
	if n < 0 {
		n = len(read)
	}
	n -= len("]")
	return read[:n] + "; full output: " + at + read[n:]
}
