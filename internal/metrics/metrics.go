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
// plus the Go runtime's and the process's own (go_*, process_*: runtime.go).
// Label values are conch's own words (tool names, result and reason
// codes, configured host names), so the series stay few.
//
// The format is written here, not by the Prometheus client library: that
// library and the protocol buffers it brings cost every conch process
// about 12 ms of start-up (package initialisation, measured on `conch
// --help`: 31.6 → 19.2 ms), the session's init included, for a handful
// of counters served to whoever scrapes. The tests read what is served
// with Prometheus's own parser.
package metrics

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
	opts Options

	mu        sync.Mutex
	calls     *vec
	duration  *vec
	spawns    *vec
	inits     *vec
	denials   *vec
	questions *vec
}

// DurationBuckets are the bounds of the call duration histogram, in
// seconds: 1 ms to about 4.4 minutes, each four times the last (a call
// ends within a few ms or runs for minutes; waits are capped at 600 s).
var DurationBuckets = exponentialBuckets(0.001, 4, 10)

func exponentialBuckets(start, factor float64, n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = start
		start *= factor
	}
	return b
}

// New returns the metrics.
func New(opts *Options) *Metrics {
	m := &Metrics{
		calls: newVec("conch_tool_calls_total", "counter",
			"Tool calls by tool and result (ok, error, denied, background, cancelled).", "tool", "result"),
		duration: newVec("conch_tool_call_duration_seconds", "histogram",
			"How long tool calls took, from the arguments to the result.", "tool"),
		spawns: newVec("conch_spawns_total", "counter",
			"Processes started for commands, by host.", "host"),
		inits: newVec("conch_inits_total", "counter",
			"Session inits started (containment), by result.", "result"),
		denials: newVec("conch_denials_total", "counter",
			"Operations the sandbox denied and command lines the rules denied (reason rule), by reason.", "reason"),
		questions: newVec("conch_questions_total", "counter",
			"Questions put to the user, by kind and answer.", "kind", "answer"),
	}
	if opts != nil {
		m.opts = *opts
	}
	return m
}

// Record counts e.
func (m *Metrics) Record(_ context.Context, e ops.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch e := e.(type) {
	case ops.CallEnd:
		m.calls.at(e.Tool, e.Result).value++
		m.duration.at(e.Tool).observe(e.Duration.Seconds())
	case ops.Spawn:
		host := e.Host
		if host == "" {
			host = "local"
		}
		m.spawns.at(host).value++
	case ops.Init:
		m.inits.at(e.Result).value++
	case ops.Denied:
		m.denials.at(e.Reason).value++
	case ops.Decision:
		if e.Decision == "deny" {
			m.denials.at("rule").value++
		}
	case ops.Answer:
		m.questions.at(e.Kind, e.Choice).value++
	}
}

// Handler serves the metrics in the Prometheus text format, version
// 0.0.4. It does no authentication: the HTTP server mounts it behind its
// bearer token.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(m.exposition())
	})
}

// exposition writes every family, in name order, as a scrape reads them.
func (m *Metrics) exposition() []byte {
	var fams []family
	m.mu.Lock()
	for _, v := range []*vec{m.calls, m.duration, m.spawns, m.inits, m.denials, m.questions} {
		fams = append(fams, v.family())
	}
	m.mu.Unlock()
	if f := m.opts.RunningTasks; f != nil {
		fams = append(fams, single("conch_tasks_running", "gauge", "Background tasks running or stopping now.", float64(f())))
	}
	if f := m.opts.AuditFailures; f != nil {
		fams = append(fams, single("conch_audit_write_failures_total", "counter", "Audit events that could not be written.", float64(f())))
	}
	fams = append(fams, runtimeFamilies()...)
	slices.SortFunc(fams, func(a, b family) int { return strings.Compare(a.name, b.name) })
	var b bytes.Buffer
	for _, f := range fams {
		f.write(&b)
	}
	return b.Bytes()
}

// vec is a family of one kind, a series per label values.
type vec struct {
	name, kind, help string
	labels           []string
	series           map[labelValues]*series
}

// labelValues are a series' label values, in the vec's order (two at
// most); as a map key, a lookup allocates nothing.
type labelValues [2]string

// series is one labelled series: a counter's value, or a histogram's
// buckets (counts per bound, not cumulative), sum and count.
type series struct {
	values  []string
	value   float64
	buckets []uint64
	sum     float64
	count   uint64
}

func newVec(name, kind, help string, labels ...string) *vec {
	if len(labels) > len(labelValues{}) {
		panic("metrics: " + name + " has more labels than a series keeps")
	}
	return &vec{name: name, kind: kind, help: help, labels: labels, series: map[labelValues]*series{}}
}

// at is the series of the label values given (made valid UTF-8: the
// format allows nothing else), made on first use.
func (v *vec) at(values ...string) *series {
	for i, s := range values {
		if !utf8.ValidString(s) {
			values[i] = strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	var key labelValues
	copy(key[:], values)
	s := v.series[key]
	if s == nil {
		s = &series{values: slices.Clone(values)}
		if v.kind == "histogram" {
			s.buckets = make([]uint64, len(DurationBuckets))
		}
		v.series[key] = s
	}
	return s
}

// observe adds x to a histogram series.
func (s *series) observe(x float64) {
	if i, _ := slices.BinarySearch(DurationBuckets, x); i < len(s.buckets) {
		s.buckets[i]++
	}
	s.sum += x
	s.count++
}

// family is a family's text: its name, kind and help, and its samples.
type family struct {
	name, kind, help string
	samples          []sample
}

// sample is one line: the name's suffix (_bucket, _sum, …), labels as
// name, value pairs, and the value.
type sample struct {
	suffix string
	labels []string
	value  float64
}

func single(name, kind, help string, v float64) family {
	return family{name: name, kind: kind, help: help, samples: []sample{{value: v}}}
}

// family snapshots v; the caller holds the lock.
func (v *vec) family() family {
	f := family{name: v.name, kind: v.kind, help: v.help}
	keys := make([]labelValues, 0, len(v.series))
	for k := range v.series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b labelValues) int { return slices.Compare(a[:], b[:]) })
	for _, k := range keys {
		s := v.series[k]
		labels := make([]string, 0, 2*len(v.labels)+2)
		for i, l := range v.labels {
			labels = append(labels, l, s.values[i])
		}
		if v.kind != "histogram" {
			f.samples = append(f.samples, sample{labels: labels, value: s.value})
			continue
		}
		var cum uint64
		for i, bound := range DurationBuckets {
			cum += s.buckets[i]
			f.samples = append(f.samples, sample{suffix: "_bucket", labels: append(slices.Clip(labels), "le", formatFloat(bound)), value: float64(cum)})
		}
		f.samples = append(f.samples,
			sample{suffix: "_bucket", labels: append(slices.Clip(labels), "le", "+Inf"), value: float64(s.count)},
			sample{suffix: "_sum", labels: labels, value: s.sum},
			sample{suffix: "_count", labels: labels, value: float64(s.count)})
	}
	return f
}

// write appends f in the text format: HELP, TYPE, then a line per
// sample with its labels in name order.
func (f family) write(b *bytes.Buffer) {
	b.WriteString("# HELP " + f.name + " ")
	escape(b, f.help, false)
	b.WriteString("\n# TYPE " + f.name + " " + f.kind + "\n")
	for _, s := range f.samples {
		b.WriteString(f.name + s.suffix)
		if len(s.labels) > 0 {
			idx := make([]int, len(s.labels)/2)
			for i := range idx {
				idx[i] = 2 * i
			}
			slices.SortFunc(idx, func(i, j int) int { return strings.Compare(s.labels[i], s.labels[j]) })
			b.WriteByte('{')
			for n, i := range idx {
				if n > 0 {
					b.WriteByte(',')
				}
				b.WriteString(s.labels[i] + `="`)
				escape(b, s.labels[i+1], true)
				b.WriteByte('"')
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(formatFloat(s.value))
		b.WriteByte('\n')
	}
}

// escape writes s escaped as the format wants: backslash and line feed,
// and in a label value the double quote too.
func escape(b *bytes.Buffer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// formatFloat writes v as Prometheus does: shortest form, +Inf, -Inf,
// NaN.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
