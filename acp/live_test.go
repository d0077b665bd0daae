//go:build linux

package acp_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// card is a terminal card as a client accumulates it: the data of every
// terminal_output of one tool call, in order, and the update that ended it.
type card struct {
	live  []string       // data of the updates before the result
	data  string         // all data, as the client's terminal holds it
	final map[string]any // the update with the status
}

// cardOf accumulates the terminal card of call id from updates us.
func cardOf(t *testing.T, us []map[string]any, id string) card {
	t.Helper()
	var c card
	for _, u := range us {
		if u["sessionUpdate"] != "tool_call_update" || u["toolCallId"] != id {
			continue
		}
		if c.final != nil {
			t.Errorf("an update after the result of %s: %s", id, jsonString(u))
		}
		data, _ := get(u, "_meta", "terminal_output", "data").(string)
		if tid := get(u, "_meta", "terminal_output", "terminal_id"); tid != nil && tid != id {
			t.Errorf("terminal_output for terminal %v in call %s", tid, id)
		}
		c.data += data
		if u["status"] == nil {
			if get(u, "_meta", "terminal_exit") != nil || u["content"] != nil {
				t.Errorf("a live update carries more than output: %s", jsonString(u))
			}
			c.live = append(c.live, data)
			continue
		}
		c.final = u
	}
	if c.final == nil {
		t.Fatalf("no result for %s in %s", id, jsonString(us))
	}
	return c
}

// TestLiveOutput: a running command's terminal card receives its output
// as it is printed, in order, each update carrying only new bytes; the
// final update carries the rest and the exit; a replay draws the card the
// client had accumulated.
func TestLiveOutput(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)
	cmd := "for i in 1 2 3; do echo $i; sleep 0.3; done; echo err >&2; exit 3"
	_, notes := c.call("session/prompt", promptParams(sid, cmd))
	us := c.rawUpdates(notes, sid)
	got := cardOf(t, us, "call-1")
	if len(got.live) < 2 {
		t.Errorf("%d live updates %q, want several", len(got.live), got.live)
	}
	for _, d := range got.live {
		if d == "" {
			t.Errorf("an empty live update in %q", got.live)
		}
	}
	if got.data != "1\n2\n3\nerr\n" {
		t.Errorf("card holds %q, want the output in the order written", got.data)
	}
	if get(got.final, "_meta", "terminal_exit", "exit_code") != float64(3) || get(got.final, "status") != "failed" {
		t.Errorf("final update %s", jsonString(got.final))
	}
	h.close()

	h = newHarness(t, state, marker)
	c = h.cli
	c.initialize(true)
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	replayed := cardOf(t, c.rawUpdates(notes, sid), "call-1")
	if len(replayed.live) != 0 {
		t.Errorf("replay sent live updates %q", replayed.live)
	}
	if replayed.data != got.data {
		t.Errorf("replayed card %q, live card %q", replayed.data, got.data)
	}
	if d := cmp.Diff(get(got.final, "_meta", "terminal_exit"), get(replayed.final, "_meta", "terminal_exit")); d != "" {
		t.Errorf("replayed exit (-live +replayed):\n%s", d)
	}
}

// TestLiveOutputInterleaved: stdout and stderr reach the card in the
// order they were written when the writes are apart in time.
func TestLiveOutputInterleaved(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(t.TempDir())
	_, us := c.prompt(sid, "echo a; sleep 0.4; echo b >&2; sleep 0.4; echo c; sleep 0.4; echo d >&2")
	if got := cardOf(t, us, "call-1").data; got != "a\nb\nc\nd\n" {
		t.Errorf("card holds %q, want a b c d in order", got)
	}
}

// TestLiveOutputCancelled: a cancelled command's card keeps what it
// printed, and the replay draws the same card.
func TestLiveOutputCancelled(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	h := newHarness(t, state, marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(work)
	id := c.start("session/prompt", promptParams(sid, "echo started; : > up; sleep 30"))
	testutil.WaitFor(t, 5*time.Second, "the command to start", func() bool { _, err := os.Stat(filepath.Join(work, "up")); return err == nil })
	time.Sleep(300 * time.Millisecond) // a live update has gone out
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	_, notes := c.await(id)
	got := cardOf(t, c.rawUpdates(notes, sid), "call-1")
	if len(got.live) == 0 || got.data != "started\n" || get(got.final, "_meta", "terminal_exit", "signal") != "SIGTERM" {
		t.Errorf("cancelled card: live %q, data %q, final %s", got.live, got.data, jsonString(got.final))
	}
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	replayed := cardOf(t, c.rawUpdates(notes, sid), "call-1")
	if replayed.data != got.data {
		t.Errorf("replayed card %q, live card %q", replayed.data, got.data)
	}
}

// TestLiveOutputFlood: a flood is shown up to the live cap, then the final
// update gives a skip line and the end; the card stays bounded.
func TestLiveOutputFlood(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	h := newHarness(t, t.TempDir(), marker)
	c := h.cli
	c.initialize(true)
	sid := c.newSession(t.TempDir())
	_, us := c.prompt(sid, "for i in $(seq 1 20); do seq 1 20000; sleep 0.05; done; echo THE-END")
	got := cardOf(t, us, "call-1")
	if len(got.data) > 1<<20+40<<10 {
		t.Errorf("card holds %d bytes", len(got.data))
	}
	if !strings.Contains(got.data, " bytes skipped]\n") || !strings.HasSuffix(got.data, "19999\n20000\nTHE-END\n") {
		t.Errorf("card does not show a skip and the end: %q … %q", got.data[:100], got.data[max(0, len(got.data)-300):])
	}
}

// BenchmarkLiveOutput50MB runs a command printing 50 MB through the ACP
// agent, alternating a session whose card is fed live with one whose
// client has no terminals (no live output), and reports each one's
// throughput, their ratio ("live/plain", target >= 0.5) and the largest
// heap seen while they ran:
//
//	go test -run '^$' -bench LiveOutput50MB -benchtime 5x ./acp/
func BenchmarkLiveOutput50MB(b *testing.B) {
	const size = 50_000_000
	marker := testutil.Marker(b)
	h := newHarness(b, b.TempDir(), marker)
	c := h.cli
	work := b.TempDir()
	c.initialize(true)
	live := c.newSession(work)
	c.initialize(false)
	plain := c.newSession(work)
	cmd := "yes 'the quick brown fox jumps over the lazy dog' | head -c " + strconv.Itoa(size)

	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var tLive, tPlain time.Duration
	run := func(sid string) time.Duration {
		start := time.Now()
		_, notes := c.call("session/prompt", promptParams(sid, cmd))
		d := time.Since(start)
		if len(notes) < 2 {
			b.Fatalf("%d updates", len(notes))
		}
		return d
	}
	for b.Loop() {
		tLive += run(live)
		tPlain += run(plain)
	}
	close(stop)
	<-sampled
	mbps := func(d time.Duration) float64 { return float64(b.N) * size / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(tLive), "live-MB/s")
	b.ReportMetric(mbps(tPlain), "plain-MB/s")
	b.ReportMetric(tPlain.Seconds()/tLive.Seconds(), "live/plain")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
}
