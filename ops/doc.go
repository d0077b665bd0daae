// Package ops is the vocabulary of what conch reports about its work: the
// events its layers emit (a tool call, a rule decision, a question and its
// answer, a grant, a denial, a spawn, a process's end, a kill, an init),
// the one interface they emit them through (Recorder), and the spans a
// trace shows a call as (Start).
//
// Three consumers read the same events, each for its own audience: the
// audit log (one hash-chained JSON line per event, for whoever must answer
// afterwards what ran and who allowed it), the OpenTelemetry tracer (a
// span per call with children for its phases) and the Prometheus metrics
// (counts and durations). Tee joins them into one Recorder. A layer is
// handed a Recorder through its Options; nil means off, and costs a
// comparison:
//
//	if r := opts.Recorder; r != nil {
//		r.Record(ctx, ops.Call{Owner: s.ID, Tool: "bash", Command: cmd})
//	}
//
// Events carry facts, never a command's output or environment. A Recorder
// is called on the caller's goroutine, in the order of the facts (the
// call's event before its command is spawned), and must return fast: the
// audit log queues the line for its writer, the metrics count, the
// tracer annotates a span. A Recorder never fails the caller: what it
// cannot record it reports its own way (the audit log logs a failed
// write and carries on).
//
// Events are plain values with JSON field names fixed here
// (docs/operations.md#events), which the audit log writes and the remote
// agent will send up: Marshal and Unmarshal give their JSON form.
package ops
