//go:build linux

package metrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/conch-dev/conch/internal/metrics"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/ops"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// scrape GETs /metrics from a real HTTP server and parses it as
// Prometheus does.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// series returns "name{l=v,…} value" (labels in name order, as the
// format writes them) for each sample of a counter or
// gauge family, sorted.
func series(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := m.GetCounter().GetValue()
		if f.GetType() == dto.MetricType_GAUGE {
			v = m.GetGauge().GetValue()
		}
		out = append(out, f.GetName()+"{"+strings.Join(ls, ",")+"} "+strconv.FormatFloat(v, 'f', -1, 64))
	}
	sort.Strings(out)
	return out
}

// TestScrape: the counts a scraper reads match the events recorded.
func TestScrape(t *testing.T) {
	running := 2
	var auditFailures int64 = 1
	m := metrics.New(&metrics.Options{RunningTasks: func() int { return running }, AuditFailures: func() int64 { return auditFailures }})
	ctx := context.Background()
	for i := range 5 {
		res := "ok"
		if i == 4 {
			res = "error"
		}
		m.Record(ctx, ops.CallEnd{Owner: "s1", Tool: "bash", Result: res, Duration: time.Duration(i+1) * 3 * time.Millisecond})
		m.Record(ctx, ops.Spawn{Owner: "s1"})
	}
	m.Record(ctx, ops.CallEnd{Owner: "s1", Tool: "task_list", Result: "ok", Duration: 100 * time.Microsecond})
	m.Record(ctx, ops.Spawn{Owner: "s1", Host: "gpu1"})
	m.Record(ctx, ops.Init{Owner: "s1", Result: "ok"})
	m.Record(ctx, ops.Denied{Owner: "s1", Op: "write", Reason: "read-only"})
	m.Record(ctx, ops.Denied{Owner: "s1", Op: "write", Reason: "read-only"})
	m.Record(ctx, ops.Denied{Owner: "s1", Op: "connect", Reason: "not in the allowlist"})
	m.Record(ctx, ops.Decision{Owner: "s1", Decision: "deny", Rule: "Bash(rm -rf:*)"})
	m.Record(ctx, ops.Decision{Owner: "s1", Decision: "allow"})
	m.Record(ctx, ops.Answer{Owner: "s1", Kind: "rule", Choice: "allow_once", AnsweredBy: "user"})
	m.Record(ctx, ops.Answer{Owner: "s1", Kind: "escalation", Choice: "deny", AnsweredBy: "user"})
	m.Record(ctx, ops.Answer{Owner: "s1", Kind: "rule", Choice: "allow_once", AnsweredBy: "client"})
	m.Record(ctx, ops.Call{Owner: "s1", Tool: "bash", Command: "\xff"}) // nothing to count

	fams := scrape(t, m.Handler())
	want := map[string][]string{
		"conch_tool_calls_total": {
			"conch_tool_calls_total{result=error,tool=bash} 1",
			"conch_tool_calls_total{result=ok,tool=bash} 4",
			"conch_tool_calls_total{result=ok,tool=task_list} 1",
		},
		"conch_spawns_total":  {"conch_spawns_total{host=gpu1} 1", "conch_spawns_total{host=local} 5"},
		"conch_inits_total":   {"conch_inits_total{result=ok} 1"},
		"conch_tasks_running": {"conch_tasks_running{} 2"},
		"conch_denials_total": {
			"conch_denials_total{reason=not in the allowlist} 1",
			"conch_denials_total{reason=read-only} 2",
			"conch_denials_total{reason=rule} 1",
		},
		"conch_questions_total": {
			"conch_questions_total{answer=allow_once,kind=rule} 2",
			"conch_questions_total{answer=deny,kind=escalation} 1",
		},
		"conch_audit_write_failures_total": {"conch_audit_write_failures_total{} 1"},
	}
	for name, w := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("no %s in the scrape", name)
			continue
		}
		if got := series(f); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", name, got, w)
		}
	}
	h := fams["conch_tool_call_duration_seconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no duration histogram: %v", h)
	}
	for _, s := range h.GetMetric() {
		hist := s.GetHistogram()
		tool := s.GetLabel()[0].GetValue()
		switch tool {
		case "bash":
			// 3+6+9+12+15 ms.
			if hist.GetSampleCount() != 5 || int(hist.GetSampleSum()*1000+0.5) != 45 {
				t.Errorf("bash durations: %d samples, sum %v", hist.GetSampleCount(), hist.GetSampleSum())
			}
			if b := hist.GetBucket()[1]; b.GetUpperBound() != 0.004 || b.GetCumulativeCount() != 1 {
				t.Errorf("bash: the 4 ms bucket holds %d, want 1", b.GetCumulativeCount())
			}
		case "task_list":
			if hist.GetSampleCount() != 1 {
				t.Errorf("task_list durations: %d samples", hist.GetSampleCount())
			}
		}
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("no go_ or process_ series")
	}

	running = 0
	if got := series(scrape(t, m.Handler())["conch_tasks_running"]); got[0] != "conch_tasks_running{} 0" {
		t.Errorf("after the tasks ended: %v", got)
	}
}

// BenchmarkRecord is the cost of counting one call's end.
func BenchmarkRecord(b *testing.B) {
	m := metrics.New(nil)
	e := ops.CallEnd{Owner: "s1", Tool: "bash", Result: "ok", Duration: 3 * time.Millisecond}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		m.Record(ctx, e)
	}
}
