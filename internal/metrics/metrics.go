// Package metrics counts conch's work for Prometheus: an ops.Recorder that
// turns events into counters and a histogram, and the http.Handler that
// serves them in the text exposition format (docs/operations.md#metrics).
//
// The series, all prefixed conch_:
//
//	tool_calls_total{tool, result}          calls by tool and result (ops.CallEnd)
//	tool_call_duration_seconds{tool}        their duration (histogram)
//	spawns_total{host}                      processes started (ops.Spawn; host "local" here)
//	tasks_running                           background tasks running or stopping now
//	inits_total{result}                     session inits started (ops.Init)
//	denials_total{reason}                   operations the sandbox denied (ops.Denied), and
//	                                        command lines the rules denied (reason "rule")
//	questions_total{kind, answer}           questions to the user by answer (ops.Answer)
//	audit_write_failures_total              audit events that could not be written
//
// plus the Go runtime's and the process's own (go_*, process_*). Label
// values are conch's own words (tool names, result and reason codes,
// configured host names), so the series stay few.
package metrics

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conch-dev/conch/ops"
)

// Options configures New. A nil *Options means all defaults.
type Options struct {
	// RunningTasks reports the background tasks running or stopping
	// now (tasks.Runtime.Running); nil leaves conch_tasks_running out.
	RunningTasks func() int
	// AuditFailures reports the audit events not written
	// (audit.Log.Failures); nil leaves the series out.
	AuditFailures func() int64
}

// Metrics is conch's metrics. Create it with New; it is safe for
// concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	spawns    *prometheus.CounterVec
	inits     *prometheus.CounterVec
	denials   *prometheus.CounterVec
	questions *prometheus.CounterVec
}

// DurationBuckets are the bounds of the call duration histogram, in
// seconds: 1 ms to about 4.4 minutes, each four times the last (a call
// ends within a few ms or runs for minutes; waits are capped at 600 s).
var DurationBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

// New returns the metrics, registered in a registry of their own (never
// the process-wide default one).
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_tool_calls_total", Help: "Tool calls by tool and result (ok, error, denied, background, cancelled).",
		}, []string{"tool", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "conch_tool_call_duration_seconds", Help: "How long tool calls took, from the arguments to the result.",
			Buckets: DurationBuckets,
		}, []string{"tool"}),
		spawns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_spawns_total", Help: "Processes started for commands, by host.",
		}, []string{"host"}),
		inits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_inits_total", Help: "Session inits started (containment), by result.",
		}, []string{"result"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_denials_total", Help: "Operations the sandbox denied and command lines the rules denied (reason rule), by reason.",
		}, []string{"reason"}),
		questions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conch_questions_total", Help: "Questions put to the user, by kind and answer.",
		}, []string{"kind", "answer"}),
	}
	m.reg.MustRegister(m.calls, m.duration, m.spawns, m.inits, m.denials, m.questions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if f := o.RunningTasks; f != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "conch_tasks_running", Help: "Background tasks running or stopping now.",
		}, func() float64 { return float64(f()) }))
	}
	if f := o.AuditFailures; f != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "conch_audit_write_failures_total", Help: "Audit events that could not be written.",
		}, func() float64 { return float64(f()) }))
	}
	return m
}

// Record counts e.
func (m *Metrics) Record(_ context.Context, e ops.Event) {
	switch e := e.(type) {
	case ops.CallEnd:
		tool := label(e.Tool)
		m.calls.WithLabelValues(tool, label(e.Result)).Inc()
		m.duration.WithLabelValues(tool).Observe(e.Duration.Seconds())
	case ops.Spawn:
		host := e.Host
		if host == "" {
			host = "local"
		}
		m.spawns.WithLabelValues(label(host)).Inc()
	case ops.Init:
		m.inits.WithLabelValues(label(e.Result)).Inc()
	case ops.Denied:
		m.denials.WithLabelValues(label(e.Reason)).Inc()
	case ops.Decision:
		if e.Decision == "deny" {
			m.denials.WithLabelValues("rule").Inc()
		}
	case ops.Answer:
		m.questions.WithLabelValues(label(e.Kind), label(e.Choice)).Inc()
	}
}

// label makes v a valid label value (the library panics on invalid
// UTF-8).
func label(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

// Handler serves the metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it). It does no authentication:
// the HTTP server mounts it behind its bearer token.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}
