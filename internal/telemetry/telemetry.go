// Package telemetry traces conch's tool calls with OpenTelemetry, exported
// over OTLP/HTTP to a collector (docs/operations.md#traces).
//
// Tracing is off unless an endpoint is configured: Options.Endpoint (the
// `[telemetry] otlp_endpoint` key), else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// or OTEL_EXPORTER_OTLP_ENDPOINT. Off, New returns nil and nothing of the
// SDK runs. On, the standard OTEL_* variables configure the rest (headers,
// timeout, compression, certificates, the sampler, the batch processor,
// the resource, OTEL_SERVICE_NAME); OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off again.
//
// A Tracer is an ops.Recorder and ops.Spanner: ops.Start opens the span of
// a call's phase (the call, named "execute_tool <tool>", with children
// "conch.rules", "conch.question", "conch.spawn" and "conch.run"), and the
// events recorded in it set the span's attributes: the tool, the session,
// the rule decision, the sandbox, the exit code or signal, the result. No
// span carries a command line, its output or its environment.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/conch-dev/conch/ops"
)

// Options configures New. A nil *Options means all defaults.
type Options struct {
	// Endpoint is the collector's OTLP/HTTP base URL
	// ("http://127.0.0.1:4318"; traces go to <Endpoint>/v1/traces). It
	// wins over the OTEL_EXPORTER_OTLP_* endpoints; "" leaves them to
	// decide.
	Endpoint string
	// Version is the service.version of the resource.
	Version string
	// Logger receives what the SDK reports (failed exports); default:
	// discard. OpenTelemetry's error handler is process-wide: New sets it.
	Logger *slog.Logger
}

// Configured reports whether traces are to be sent: an endpoint given or
// in the environment, and the SDK not disabled there.
func Configured(endpoint string) bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// Tracer traces tool calls. Create it with New; end it with Shutdown.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns a Tracer that exports to the configured collector, or nil
// (and no error) when none is configured (Configured). The error is for
// a configuration that cannot work: an endpoint that is not an http or
// https URL, or OTEL_EXPORTER_OTLP_PROTOCOL=grpc, which conch does not
// speak.
func New(ctx context.Context, opts *Options) (*Tracer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if !Configured(o.Endpoint) {
		return nil, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p == "grpc" {
				return nil, fmt.Errorf("telemetry: %s=grpc: conch sends OTLP over HTTP (http/protobuf or http/json)", v)
			}
			break
		}
	}
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("telemetry: otlp endpoint %q: want an http:// or https:// URL", o.Endpoint)
		}
	}
	exp, err := newExporter(o.Endpoint)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "conch"), attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	log := o.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry", "error", err) }))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/conch-dev/conch")}, nil
}

// Shutdown sends the spans still buffered and stops the exporter, within
// ctx.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// callKey holds the span of the call a context's phase belongs to.
type callKey struct{}

// Start begins the span of phase p, a child of the span in ctx; a call
// with no span in ctx takes the client's trace context
// (ops.WithTraceContext) as its remote parent, when it parses.
func (t *Tracer) Start(ctx context.Context, p ops.Phase) (context.Context, func()) {
	name := "conch." + string(p)
	var opts []trace.SpanStartOption
	if p == ops.PhaseCall {
		name = "execute_tool"
		kind := trace.SpanKindInternal
		if !trace.SpanContextFromContext(ctx).IsValid() {
			if tc, ok := ops.TraceContextFrom(ctx); ok {
				ctx = Extract(ctx, tc.Traceparent, tc.Tracestate)
				if trace.SpanContextFromContext(ctx).IsRemote() {
					kind = trace.SpanKindServer
				}
			}
		}
		opts = append(opts, trace.WithSpanKind(kind), trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool")))
	}
	ctx, span := t.tracer.Start(ctx, name, opts...)
	if p == ops.PhaseCall {
		ctx = context.WithValue(ctx, callKey{}, span)
	}
	return ctx, func() { span.End() }
}

// Extract returns ctx with the W3C trace context traceparent (and
// tracestate) as its remote span context; a traceparent that does not
// parse leaves ctx as it is.
func Extract(ctx context.Context, traceparent, tracestate string) context.Context {
	c := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		c["tracestate"] = tracestate
	}
	return propagation.TraceContext{}.Extract(ctx, c)
}

// Record sets what e says on the span of ctx's phase and, for what
// describes the whole call (the tool, the decision, the sandbox, the exit
// code, the result), on the call's span too.
func (t *Tracer) Record(ctx context.Context, e ops.Event) {
	cur := trace.SpanFromContext(ctx)
	if !cur.IsRecording() {
		return
	}
	call, _ := ctx.Value(callKey{}).(trace.Span)
	if call == nil {
		call = cur
	}
	both := func(kv ...attribute.KeyValue) {
		cur.SetAttributes(kv...)
		if call != cur {
			call.SetAttributes(kv...)
		}
	}
	switch e := e.(type) {
	case ops.Call:
		call.SetName("execute_tool " + e.Tool)
		kv := []attribute.KeyValue{attribute.String("gen_ai.tool.name", e.Tool), attribute.String("conch.session.id", e.Owner)}
		if e.CallID != "" {
			kv = append(kv, attribute.String("gen_ai.tool.call.id", e.CallID))
		}
		if e.Host != "" {
			kv = append(kv, attribute.String("conch.host", e.Host))
		}
		if e.TTY {
			kv = append(kv, attribute.Bool("conch.tty", true))
		}
		if e.Background {
			kv = append(kv, attribute.Bool("conch.background", true))
		}
		if e.Task != "" {
			kv = append(kv, attribute.String("conch.task.id", e.Task))
		}
		call.SetAttributes(kv...)
	case ops.Decision:
		both(attribute.String("conch.rules.decision", e.Decision))
		if e.Rule != "" {
			cur.SetAttributes(attribute.String("conch.rules.rule", e.Rule))
		}
	case ops.Question:
		cur.SetAttributes(attribute.String("conch.question.kind", e.Kind))
	case ops.Answer:
		cur.SetAttributes(attribute.String("conch.answer.choice", e.Choice), attribute.String("conch.answer.by", e.AnsweredBy))
	case ops.Grant:
		cur.AddEvent("conch.grant", trace.WithAttributes(attribute.String("conch.grant.kind", e.Kind), attribute.String("conch.grant.scope", e.Scope)))
	case ops.Denied:
		cur.AddEvent("conch.sandbox.denied", trace.WithAttributes(attribute.String("conch.sandbox.op", e.Op), attribute.String("conch.sandbox.reason", e.Reason)))
		both(attribute.Bool("conch.sandbox.denied", true))
	case ops.Spawn:
		both(attribute.String("conch.sandbox", e.Sandbox))
		if e.Task != "" {
			call.SetAttributes(attribute.String("conch.task.id", e.Task))
		}
	case ops.Process:
		if e.Signal != "" {
			both(attribute.String("conch.signal", e.Signal))
		} else {
			both(attribute.Int("process.exit.code", e.ExitCode))
		}
		if e.TimedOut {
			both(attribute.Bool("conch.timed_out", true))
		}
	case ops.Kill:
		cur.AddEvent("conch.kill", trace.WithAttributes(attribute.String("conch.task.id", e.Task), attribute.String("conch.kill.reason", e.Reason)))
	case ops.Init:
		cur.AddEvent("conch.init", trace.WithAttributes(attribute.String("conch.init.result", e.Result)))
	case ops.CallEnd:
		call.SetAttributes(attribute.String("conch.result", e.Result))
		if e.Result == "error" || e.Result == "denied" {
			call.SetAttributes(attribute.String("error.type", e.Result))
			call.SetStatus(codes.Error, e.Result)
		}
	}
}
