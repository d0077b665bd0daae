//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/audit"
	"github.com/conch-dev/conch/internal/metrics"
	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// BenchmarkEchoAudit: what the audit log and the metrics add to a call:
// an `echo hi` bash call through the tools on the local provider,
// alternately on tools without a recorder and on tools over the same
// executor whose recorder is an audit log and the metrics (the events the
// tools emit for it without rules: call, spawn, process, call end). Reports both p50 latencies and their ratio (target ≤ 1.05).
// The local provider is the cheapest spawn, so the ratio is an upper
// bound for the defaults.
func BenchmarkEchoAudit(b *testing.B) {
	ex, err := local.New(&local.Options{Cwd: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer ex.Close()
	l, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	plain := tools.New(ex, nil)
	recorded := tools.New(ex, &tools.Options{Recorder: ops.Tee(l, metrics.New(nil))})
	sess := tools.Session{ID: "s1"}
	args := json.RawMessage(`{"command":"echo hi","description":"Benchmark a command"}`)
	ctx := context.Background()
	run := func(ts *tools.Toolset) func() {
		return func() {
			if r := ts.Call(ctx, sess, "bash", args, nil); r.Text != "hi\n" {
				b.Fatalf("echo hi: %q", r.Text)
			}
		}
	}
	bare, withAudit := run(plain), run(recorded)
	for range 20 {
		bare()
		withAudit()
	}
	var without, with []time.Duration
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so that neither always follows
		// the other's writer.
		first, second := bare, withAudit
		if i%2 == 1 {
			first, second = withAudit, bare
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		t2 := time.Now()
		if i%2 == 0 {
			without, with = append(without, t1.Sub(t0)), append(with, t2.Sub(t1))
		} else {
			with, without = append(with, t1.Sub(t0)), append(without, t2.Sub(t1))
		}
	}
	l.Sync()
	if l.Failures() != 0 {
		b.Fatalf("%d audit events not written", l.Failures())
	}
	pw, po := p50(with), p50(without)
	b.ReportMetric(ms(pw), "audit-p50-ms")
	b.ReportMetric(ms(po), "bare-p50-ms")
	b.ReportMetric(float64(pw)/float64(po), "ratio")
}
