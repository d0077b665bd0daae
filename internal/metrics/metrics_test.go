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

// TestScrapeEscapes: label values that need escaping (a configured host
// name may hold anything) and invalid UTF-8 reach a scraper as they were
// recorded, or with U+FFFD for what was not UTF-8; everything served
// parses, the Go runtime's and the process's series included.
func TestScrapeEscapes(t *testing.T) {
	m := metrics.New(nil)
	ctx := context.Background()
	for _, host := range []string{`a"b`, `back\slash`, "line\nfeed", "bad\xffutf8", "tab\tand space"} {
		m.Record(ctx, ops.Spawn{Owner: "s1", Host: host})
	}
	m.Record(ctx, ops.CallEnd{Owner: "s1", Tool: "bash", Result: "ok", Duration: 10 * time.Minute}) // beyond the last bucket
	fams := scrape(t, m.Handler())
	want := []string{
		"conch_spawns_total{host=a\"b} 1",
		"conch_spawns_total{host=back\\slash} 1",
		"conch_spawns_total{host=bad\uFFFDutf8} 1",
		"conch_spawns_total{host=line\nfeed} 1",
		"conch_spawns_total{host=tab\tand space} 1",
	}
	if got := series(fams["conch_spawns_total"]); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q\nwant %q", got, want)
	}
	h := fams["conch_tool_call_duration_seconds"].GetMetric()[0].GetHistogram()
	// The parser keeps the +Inf bucket: the call is in it alone.
	if b := h.GetBucket(); h.GetSampleCount() != 1 || len(b) != len(metrics.DurationBuckets)+1 || b[len(b)-2].GetCumulativeCount() != 0 || b[len(b)-1].GetCumulativeCount() != 1 {
		t.Errorf("a 10 min call: %v", h)
	}
	for name, typ := range map[string]dto.MetricType{
		"go_goroutines": dto.MetricType_GAUGE, "go_gc_duration_seconds": dto.MetricType_SUMMARY,
		"go_memstats_alloc_bytes": dto.MetricType_GAUGE, "go_threads": dto.MetricType_GAUGE,
		"process_cpu_seconds_total": dto.MetricType_COUNTER, "process_open_fds": dto.MetricType_GAUGE,
		"process_resident_memory_bytes": dto.MetricType_GAUGE, "process_start_time_seconds": dto.MetricType_GAUGE,
	} {
		f := fams[name]
		if f == nil || f.GetType() != typ {
			t.Errorf("%s: %v, want a %v", name, f, typ)
			continue
		}
		if name == "go_goroutines" && f.GetMetric()[0].GetGauge().GetValue() < 1 {
			t.Errorf("go_goroutines: %v", f)
		}
		if name == "process_start_time_seconds" {
			if at := f.GetMetric()[0].GetGauge().GetValue(); at > float64(time.Now().Unix()+1) || at < float64(time.Now().Add(-time.Hour).Unix()) {
				t.Errorf("process_start_time_seconds %v, now %v", at, time.Now().Unix())
			}
		}
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
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
