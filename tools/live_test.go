//go:build linux

package tools_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/tools"
)

// liveReports collects CallOptions.Output reports with their times.
type liveReports struct {
	mu     sync.Mutex
	data   []string
	final  []bool
	at     []time.Time
	called int
}

func (l *liveReports) report(data string, final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, data)
	l.final = append(l.final, final)
	l.at = append(l.at, time.Now())
}

func (l *liveReports) all() string { return strings.Join(l.data, "") }

// check verifies that the reports end with exactly one final report and
// that no two live reports came closer than every.
func (l *liveReports) check(t *testing.T, every time.Duration) {
	t.Helper()
	if n := len(l.final); n == 0 || !l.final[n-1] {
		t.Fatalf("no final report: %v", l.final)
	}
	for i, f := range l.final[:len(l.final)-1] {
		if f {
			t.Errorf("report %d of %d is final", i, len(l.final))
		}
		if l.data[i] == "" {
			t.Errorf("live report %d is empty", i)
		}
		if i > 0 {
			if gap := l.at[i].Sub(l.at[i-1]); gap < every {
				t.Errorf("reports %d and %d %v apart, want at least %v", i-1, i, gap, every)
			}
		}
	}
}

func TestLiveOutputReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var l liveReports
	co := &tools.CallOptions{Output: l.report}
	r := e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": "for i in $(seq 1 8); do echo $i; sleep 0.1; done; echo e >&2", "description": "Count slowly", "timeoutMs": 5000}), co)
	wantOK(t, r)
	l.check(t, tools.DefaultOutputEvery)
	if len(l.data) < 3 {
		t.Errorf("%d reports %q, want several", len(l.data), l.data)
	}
	if got := l.all(); got != "1\n2\n3\n4\n5\n6\n7\n8\ne\n" {
		t.Errorf("reports hold %q", got)
	}
}

func TestLiveOutputTimeoutMarker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var l liveReports
	co := &tools.CallOptions{Output: l.report, OutputEvery: 50 * time.Millisecond}
	e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": "printf 'no newline'; sleep 30", "description": "Time out", "timeoutMs": 500}), co)
	l.check(t, 50*time.Millisecond)
	if got := l.all(); got != "no newline\n[timed out after 500ms]" {
		t.Errorf("reports hold %q", got)
	}
}

// TestLiveOutputAborted: a call cancelled without KeepAborted still ends
// its reports with a final one; a call that never started has none.
func TestLiveOutputAborted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var l liveReports
	ctx, cancel := context.WithCancel(t.Context())
	// Cancelled once the first live report holds "up" (a fixed delay
	// could end the call before bash printed it, on a loaded machine).
	report := func(data string, final bool) {
		l.report(data, final)
		if strings.Contains(data, "up") {
			cancel()
		}
	}
	r := e.ts.Call(ctx, e.sess, tools.NameBash,
		args(t, map[string]any{"command": "echo up; sleep 30", "description": "Wait", "timeoutMs": 20000}), &tools.CallOptions{Output: report})
	if !r.IsError {
		t.Fatalf("cancelled call: %q", r.Text)
	}
	l.check(t, tools.DefaultOutputEvery)
	if got := l.all(); got != "up\n" {
		t.Errorf("reports hold %q", got)
	}

	var none liveReports
	e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": "true", "description": "Nowhere", "workdir": "/no/such/dir"}), &tools.CallOptions{Output: none.report})
	if len(none.data) != 0 {
		t.Errorf("a call that never started reported %q", none.data)
	}
}

// TestLiveOutputYield: a yielded call's reports end when it leaves the
// foreground; the task still reads every byte.
func TestLiveOutputYield(t *testing.T) {
	t.Parallel()
	// A window long enough for bash to start and print on a loaded
	// machine; the second line waits past it.
	e := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 1500 * time.Millisecond}})
	var l liveReports
	r := e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": "echo before; sleep 2; echo after", "description": "Yield"}), &tools.CallOptions{Output: l.report})
	wantOK(t, r)
	l.check(t, tools.DefaultOutputEvery)
	if got := l.all(); got != "before\n" {
		t.Errorf("reports hold %q", got)
	}
	if !strings.HasPrefix(r.Text, "before\n") {
		t.Errorf("yielded result %q lost the output the card showed", r.Text)
	}
	id := r.Value.(tools.YieldedValue).TaskID
	e.settle(e.sess, id)
	if out := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}).Text; !strings.HasPrefix(out, "after\n") {
		t.Errorf("task output %q", out)
	}
}

// TestProgressLastLine: progress reports carry the last line printed so
// far, cleaned and bounded.
func TestProgressLastLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{tools: tools.Options{ProgressEvery: 100 * time.Millisecond}})
	var mu sync.Mutex
	var lines []string
	co := &tools.CallOptions{Progress: func(p tools.Progress) {
		mu.Lock()
		lines = append(lines, p.LastLine)
		mu.Unlock()
	}}
	long := strings.Repeat("é", 300)
	cmd := "echo first; printf '\\033[31mred\\033[0m\\n\\n'; sleep 0.5; printf '10%%\\r50%%'; sleep 0.5; echo " + long + "; sleep 0.5"
	wantOK(t, e.ts.Call(t.Context(), e.sess, tools.NameBash, args(t, map[string]any{"command": cmd, "description": "Print lines"}), co))
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
		if len(l) > tools.MaxProgressLine {
			t.Errorf("last line of %d bytes", len(l))
		}
	}
	if want := strings.Repeat("é", tools.MaxProgressLine/2); !seen["red"] || !seen["50%"] || !seen[want] {
		t.Errorf("last lines %q, want red, 50%% and the end of the long line", lines)
	}
}

// TestLiveOutputTTY: a tty call reports the terminal's raw stream as it
// is produced, as a piped call reports its pipes; the reports end with
// the rest, and the result's text is still the terminal's rendered view.
func TestLiveOutputTTY(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var l liveReports
	co := &tools.CallOptions{Output: l.report}
	r := e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": "for i in $(seq 1 6); do echo $i; sleep 0.15; done", "description": "Count slowly", "timeoutMs": 5000, "tty": true}), co)
	wantOK(t, r)
	l.check(t, tools.DefaultOutputEvery)
	if len(l.data) < 3 {
		t.Errorf("%d reports %q, want several", len(l.data), l.data)
	}
	if got := l.all(); got != "1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n" {
		t.Errorf("reports hold %q", got)
	}
	if r.Text != "1\n2\n3\n4\n5\n6\n" {
		t.Errorf("result %q", r.Text)
	}
}

// TestLiveOutputBehindAtTheCap: output the live reports had not sampled
// when the command ended is not reported whole when it would carry the
// reports past MaxLiveOutput: the final report gives a skip line and the
// stream's end, as past the cap. Here the samples (every 100 ms) have
// taken all but 4 KiB of the cap, a 60 kB chunk at a time, when between
// two of them the command prints 60 kB more and ends. (On a loaded machine the
// samples fell behind near the cap, and an ACP card held 1 MiB and
// 42 KiB: TestLiveOutputFlood.)
func TestLiveOutputBehindAtTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var l liveReports
	co := &tools.CallOptions{Output: l.report, OutputEvery: 500 * time.Millisecond}
	// Chunks the executor's in-memory tail (64 KiB) holds whole.
	chunk := (tools.MaxLiveOutput - 4<<10) / 17
	cmd := fmt.Sprintf("for i in $(seq 17); do head -c %d /dev/zero | tr '\\0' x; sleep 0.15; done; sleep 0.3; head -c 60000 /dev/zero | tr '\\0' y; echo; echo THE-END", chunk)
	r := e.ts.Call(t.Context(), e.sess, tools.NameBash,
		args(t, map[string]any{"command": cmd, "description": "Flood up to the cap", "timeoutMs": 20000}), co)
	wantOK(t, r)
	got := l.all()
	if len(got) > tools.MaxLiveOutput+16<<10+200 {
		t.Errorf("the reports hold %d bytes, past the cap and a tail", len(got))
	}
	if !strings.Contains(got, " bytes skipped]\n") || !strings.HasSuffix(got, "yyy\nTHE-END\n") {
		t.Errorf("the reports do not give a skip line and the end: %q … %q", got[:min(100, len(got))], got[max(0, len(got)-100):])
	}
}
