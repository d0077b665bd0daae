package ops

import "context"

// Recorder receives the events of conch's layers. Record must be safe for
// concurrent use, must not keep ctx beyond the call, must not block on
// I/O (queue it instead) and must not fail the caller: what it cannot
// record it reports its own way. Events from one goroutine keep their
// order. ctx carries the span of the phase the event belongs to (Start),
// which a tracer annotates.
type Recorder interface {
	Record(ctx context.Context, e Event)
}

// Phase is a stretch of a tool call that a trace shows as a span.
type Phase string

const (
	// PhaseCall is the whole tool call, from the arguments to the
	// result; its span is named after the tool by the Call event
	// recorded in it.
	PhaseCall Phase = "call"
	// PhaseRules is the permission rules' check of a command line.
	PhaseRules Phase = "rules"
	// PhaseQuestion is one question to the user, until its answer.
	PhaseQuestion Phase = "question"
	// PhaseSpawn is starting a command's process (its session's init
	// included when it starts one).
	PhaseSpawn Phase = "spawn"
	// PhaseRun is the process from its start to its end (for a call
	// that moves to the background, to the move).
	PhaseRun Phase = "run"
)

// Spanner is the optional interface of a Recorder that traces: Start
// begins a phase's span as a child of the one in ctx and returns ctx
// carrying it and the function that ends it. The function must be
// called exactly once.
type Spanner interface {
	Start(ctx context.Context, p Phase) (context.Context, func())
}

func nop() {}

// Start begins phase p of a call on rec, when rec traces (Spanner), and
// returns the context the phase's events are recorded with and the
// function that ends it. With a nil rec, or one that does not trace, it
// returns ctx and a function that does nothing, allocating nothing.
//
//	ctx, end := ops.Start(ctx, rec, ops.PhaseRules)
//	decision := check(line)
//	rec.Record(ctx, ops.Decision{…})
//	end()
func Start(ctx context.Context, rec Recorder, p Phase) (context.Context, func()) {
	if s, ok := rec.(Spanner); ok {
		return s.Start(ctx, p)
	}
	return ctx, nop
}

// Tee returns a Recorder that hands each event to every non-nil rec in
// order, and traces with the first of them that traces. It returns nil
// when all are nil (so that a layer handed it stays at zero cost) and
// the only one when one is left.
func Tee(recs ...Recorder) Recorder {
	var t tee
	for _, r := range recs {
		if r != nil {
			t = append(t, r)
		}
	}
	switch len(t) {
	case 0:
		return nil
	case 1:
		return t[0]
	}
	return t
}

type tee []Recorder

func (t tee) Record(ctx context.Context, e Event) {
	for _, r := range t {
		r.Record(ctx, e)
	}
}

func (t tee) Start(ctx context.Context, p Phase) (context.Context, func()) {
	for _, r := range t {
		if s, ok := r.(Spanner); ok {
			return s.Start(ctx, p)
		}
	}
	return ctx, nop
}

type traceKey struct{}

// TraceContext is a client's W3C trace context: the traceparent and
// tracestate values, as the client sent them.
type TraceContext struct {
	Traceparent, Tracestate string
}

// WithTraceContext returns ctx carrying the client's W3C trace context, so
// that a tracer makes the call's span a child of the client's
// (docs/operations.md#traces). A transport calls it with what the client
// sent: the traceparent and tracestate headers of an HTTP request, or
// `_meta.traceparent` and `_meta.tracestate` of an MCP request (protocol
// 2026-07-28). Nothing is parsed here: a tracer parses it, and ignores a
// malformed value; with traceparent "" ctx is returned as it is.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, TraceContext{traceparent, tracestate})
}

// TraceContextFrom returns the trace context WithTraceContext put in ctx.
func TraceContextFrom(ctx context.Context) (TraceContext, bool) {
	tc, ok := ctx.Value(traceKey{}).(TraceContext)
	return tc, ok
}

type callIDKey struct{}

// WithCallID returns ctx carrying the id of the tool call it serves
// (NewCallID), so that the layers below the one that made it put it in
// their events (CallIDFrom).
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallIDFrom returns the call id WithCallID put in ctx, or "".
func CallIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}
