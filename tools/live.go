package tools

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/conch-dev/conch/shell"
)

// DefaultOutputEvery is the least time between two live output reports
// of one call when CallOptions.OutputEvery is not set: an editor redraws
// smoothly, and a chatty command costs at most ten messages a second.
const DefaultOutputEvery = 100 * time.Millisecond

// MaxLiveOutput bounds what the live reports of one call carry before the
// end of the command: past it, the reports stop, and the final one gives
// a skip line and the end of each stream (at most liveTailBytes of each).
// A person watching a card reads the start and the end of a flood, and
// the transport's record of the card stays small.
const MaxLiveOutput = 1 << 20

// samplesPerReport is how many times the output is sampled per report
// period (see liveOutput).
const samplesPerReport = 5

// liveTailBytes is the most of each stream the final report carries after
// the live reports stopped or fell behind.
const liveTailBytes = 16 << 10

// liveOutput follows a foreground command's output for
// CallOptions.Output without consuming it (shell.Follower).
//
// Two pipes do not say in which order their bytes were written, so the
// output is sampled samplesPerReport times per report period, each sample
// taking stdout's new bytes and then stderr's: the two streams are
// interleaved as written to within a sample period, and each stream keeps
// its order exactly.
type liveOutput struct {
	f       shell.Follower
	written func() (stdout, stderr int64)
	report  func(data string, final bool)
	every   time.Duration // the least time between two reports
	last    time.Time     // of the last report

	off     shell.Offsets
	pending strings.Builder // sampled, not reported yet
	shown   int64           // bytes reported and pending
	stopped bool            // past MaxLiveOutput
	lastNL  bool            // the last byte shown was a newline, or nothing was shown
	// after is a line the final report ends with, after the markers: the
	// user's answer to a question about the command that left the result
	// as it is (docs/sandbox.md#escalation).
	after string
}

// newLiveOutput follows src (a shell.Process, a shell.Terminal), whose
// streams' sizes written gives, for co.Output; nil when there is nothing
// to report to or src is not a shell.Follower.
func newLiveOutput(src any, written func() (stdout, stderr int64), co CallOptions) *liveOutput {
	f, ok := src.(shell.Follower)
	if !ok || co.Output == nil {
		return nil
	}
	every := co.OutputEvery
	if every <= 0 {
		every = DefaultOutputEvery
	}
	return &liveOutput{f: f, written: written, report: co.Output, every: every, last: time.Now(), lastNL: true}
}

// pace starts the clock that paces l's samples (samplesPerReport per
// report period): the channel to call tick on, nil for a nil l, and the
// function that stops it.
func (l *liveOutput) pace() (<-chan time.Time, func()) {
	if l == nil {
		return nil, func() {}
	}
	st := time.NewTicker(max(l.every/samplesPerReport, time.Millisecond))
	return st.C, st.Stop
}

// tick samples the output, and reports what was sampled once a report
// period has passed since the last report. Reports go by the clock, not
// by a count of samples: a ticker that fell behind delivers a late tick
// and the next one close together.
func (l *liveOutput) tick() {
	l.sample()
	if time.Since(l.last) >= l.every && l.flush() {
		l.last = time.Now()
	}
}

// sample takes what the command wrote since the previous sample.
func (l *liveOutput) sample() {
	if l.stopped {
		return
	}
	got := l.f.Follow(l.off)
	if int64(len(got.Stdout)+len(got.Stderr))+l.shown > MaxLiveOutput {
		l.stopped = true
		return
	}
	l.off = got.Next
	l.add(got.Stdout, got.Skipped.Stdout)
	l.add(got.Stderr, got.Skipped.Stderr)
}

// add appends text, after a skip line when skipped bytes lie before it.
func (l *liveOutput) add(text string, skipped int64) {
	if skipped > 0 {
		l.write(lineStart(l.lastNL) + skipLine(skipped))
	}
	l.write(text)
}

func (l *liveOutput) write(s string) {
	if s == "" {
		return
	}
	l.pending.WriteString(s)
	l.shown += int64(len(s))
	l.lastNL = s[len(s)-1] == '\n'
}

// skipLine is the line a card shows for output it did not get.
func skipLine(n int64) string {
	return "[… " + strconv.FormatInt(n, 10) + " bytes skipped]\n"
}

// flush reports what was sampled since the previous report, if anything,
// and says whether it did.
func (l *liveOutput) flush() bool {
	if l.pending.Len() == 0 {
		return false
	}
	l.report(l.pending.String(), false)
	l.pending.Reset()
	return true
}

// finish makes the final report once the command has ended (or left the
// foreground): the rest of its output, and for an ended command the
// markers a card does not draw as its exit pill (timeout, a process left
// holding the output), each on its own line. With again set the command
// is about to run again outside the sandbox (docs/sandbox.md), and the
// report is not the call's final one: it carries the exit marker too,
// which no pill will draw, and a newline for the next run's output.
func (l *liveOutput) finish(res *shell.Result, again bool) {
	var jump shell.Offsets
	out, errOut := l.written()
	if !l.stopped && l.shown+(out-l.off.Stdout)+(errOut-l.off.Stderr) > MaxLiveOutput {
		// The samples fell behind near the cap (a loaded machine): the
		// rest, reported whole, would carry the card past it.
		l.stopped = true
	}
	if l.stopped {
		// Past the cap the card gets a skip line and each stream's end.
		jump.Stdout = max(0, out-liveTailBytes-l.off.Stdout)
		jump.Stderr = max(0, errOut-liveTailBytes-l.off.Stderr)
		l.off.Stdout += jump.Stdout
		l.off.Stderr += jump.Stderr
	}
	got := l.f.Follow(l.off)
	l.off = got.Next
	l.add(got.Stdout, jump.Stdout+got.Skipped.Stdout)
	l.add(got.Stderr, jump.Stderr+got.Skipped.Stderr)
	if res != nil {
		m := cardMarkers(*res)
		if again {
			m = append(m, exitMarkers(*res)...)
		}
		if len(m) > 0 {
			l.write(lineStart(l.lastNL) + strings.Join(m, "\n"))
		}
	}
	if l.after != "" && !again {
		l.write(lineStart(l.lastNL) + l.after)
	}
	if again {
		l.write(lineStart(l.lastNL))
	}
	l.report(l.pending.String(), !again)
	l.pending.Reset()
}

// lineStart is what starts a new line after text whose last byte was a
// newline (or that is empty) or not.
func lineStart(atNewline bool) string {
	if atNewline {
		return ""
	}
	return "\n"
}

// cardMarkers are the markers of a foreground result that a terminal card
// shows in its text: all but the exit or signal marker, which the card
// draws as its exit pill. The provider's notes come first.
func cardMarkers(r shell.Result) []string {
	m := slices.Clone(r.Notes)
	if r.LeftRunning {
		m = append(m, leftRunningMarker)
	}
	if r.TimedOut {
		m = append(m, timedOutMarker(r.Timeout))
	}
	return m
}

// lastLine is the last non-blank line p printed so far, stdout's else
// stderr's, cleaned, at most MaxProgressLine bytes (its end kept).
func lastLine(p shell.Process) string {
	peek := p.Peek(4 * MaxProgressLine)
	for _, text := range []string{peek.Stdout, peek.Stderr} {
		lines := strings.Split(cleanText(text), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if line := strings.TrimSpace(lines[i]); line != "" {
				return cutStart(line, MaxProgressLine)
			}
		}
	}
	return ""
}

// cutStart is the last at most n bytes of s, starting at a character.
func cutStart(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
