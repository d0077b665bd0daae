package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/conch-dev/conch/internal/audit"
	"github.com/conch-dev/conch/internal/metrics"
	"github.com/conch-dev/conch/internal/telemetry"
	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/tasks"
)

// The operations settings live in tables of the configuration file
// (docs/configuration.md, docs/operations.md). They are registered here,
// beside their flags, rather than in configfile.go's list.
func init() {
	tableKeys["audit-path"] = "audit.path"
	tableKeys["audit-max-bytes"] = "audit.max_bytes"
	tableKeys["otlp-endpoint"] = "telemetry.otlp_endpoint"
}

// auditOff is the audit path that turns the audit log off.
const auditOff = "off"

// opsConfig is the settings of the audit log, traces and metrics.
type opsConfig struct {
	auditPath     auditPath
	auditMaxBytes number
	otlpEndpoint  string
}

// auditPath is --audit-path: an absolute path, or "off".
type auditPath struct{ v string }

func (p *auditPath) String() string {
	if p == nil {
		return ""
	}
	return p.v
}

func (p *auditPath) Set(s string) error {
	if s != auditOff && !filepath.IsAbs(s) {
		return errors.New(`must be an absolute path, or "off"`)
	}
	p.v = s
	return nil
}

// addFlags registers the operations flags with their defaults.
func (o *opsConfig) addFlags(fs *flag.FlagSet) {
	o.auditPath = auditPath{audit.DefaultPath(stateDir())}
	o.auditMaxBytes = number{v: audit.DefaultMaxBytes, count: true, least: 4096}
	fs.Var(&o.auditPath, "audit-path", "the audit log: one hash-chained JSON line per call, decision, question, answer, grant, denial, process end and kill (`PATH`, or off)")
	fs.Var(&o.auditMaxBytes, "audit-max-bytes", "rotate the audit log when a line would take it past this many bytes")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "send traces of every tool call over OTLP/HTTP to this collector `URL` (default $OTEL_EXPORTER_OTLP_ENDPOINT; none: no traces)")
}

// operations is what records a stack's work: the audit log, the tracer
// and the metrics, each nil when off, and recorder, all of them as one
// ops.Recorder (nil when all are off) for the layers' Options.
type operations struct {
	audit    *audit.Log
	tracer   *telemetry.Tracer
	metrics  *metrics.Metrics
	recorder ops.Recorder
}

// build starts the operations of a stack whose tasks are rt.
func (o *opsConfig) build(log *slog.Logger, rt *tasks.Runtime) (*operations, error) {
	op := &operations{}
	if o.auditPath.v != auditOff {
		var err error
		op.audit, err = audit.Open(o.auditPath.v, &audit.Options{MaxBytes: int64(o.auditMaxBytes.v), Logger: log})
		if err != nil {
			return nil, err
		}
	}
	tr, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: o.otlpEndpoint, Version: version, Logger: log})
	if err != nil {
		return nil, err
	}
	op.tracer = tr
	mo := &metrics.Options{RunningTasks: rt.Running}
	if op.audit != nil {
		mo.AuditFailures = op.audit.Failures
	}
	op.metrics = metrics.New(mo)
	// The audit line first: it is written before the command runs.
	rec := []ops.Recorder{nil, op.metrics}
	if op.audit != nil {
		rec[0] = op.audit
	}
	if tr != nil {
		rec = append(rec, tr)
	}
	op.recorder = ops.Tee(rec...)
	return op, nil
}

// close writes what is buffered: the audit log's files are closed, the
// spans still queued are sent (within 5 s).
func (op *operations) close(log *slog.Logger) {
	if op.audit != nil {
		op.audit.Close()
	}
	if op.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := op.tracer.Shutdown(ctx); err != nil && log != nil {
			log.Warn("telemetry: spans not sent at shutdown", "error", err)
		}
	}
}

// lateRecorder is the recorder of the layers built before the operations
// (the executor, whose inits it records): it keeps the events recorded
// before the stack's recorder is built (conch run's init, started at
// build and kept for its command; at most maxEarly of them) and hands
// them and every later one on to it.
type lateRecorder struct {
	mu    sync.Mutex
	to    ops.Recorder // nil until set
	early []earlyEvent
}

type earlyEvent struct {
	ctx context.Context
	e   ops.Event
}

// maxEarly bounds the events a lateRecorder keeps before its recorder:
// the inits a stack's build starts (one).
const maxEarly = 16

func (l *lateRecorder) Record(ctx context.Context, e ops.Event) {
	l.mu.Lock()
	to := l.to
	if to == nil && len(l.early) < maxEarly {
		l.early = append(l.early, earlyEvent{ctx, e})
	}
	l.mu.Unlock()
	if to != nil {
		to.Record(ctx, e)
	}
}

// set hands the events kept so far, then every later one, to r.
func (l *lateRecorder) set(r ops.Recorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r == nil {
		l.early = nil
		return
	}
	for _, ev := range l.early {
		r.Record(ev.ctx, ev.e)
	}
	l.to, l.early = r, nil
}

// hidden makes the directories of conch's state and of its audit log
// exist (0700), so that the sandbox hides them from the first command
// on (it hides what exists when it is built; the audit log makes its
// file at its first line), and returns the audit log's directory when
// it is not the state directory: to hide too, unless the workspace or a
// temp directory lies in it (hiding it would hide them; the audit log is
// then only as safe as its file's mode: docs/operations.md#where).
func (o *opsConfig) hidden(workspace string) []string {
	os.MkdirAll(stateDir(), 0o700)
	if o.auditPath.v == auditOff || o.auditPath.v == "" {
		return nil
	}
	dir := filepath.Dir(o.auditPath.v)
	os.MkdirAll(dir, 0o700)
	if dir == stateDir() {
		return nil
	}
	for _, d := range []string{workspace, os.TempDir(), "/tmp"} {
		if d == dir || strings.HasPrefix(d, strings.TrimSuffix(dir, "/")+"/") {
			return nil
		}
	}
	return []string{dir}
}
