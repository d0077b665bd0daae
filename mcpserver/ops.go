package mcpserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/ops"
)

// withTrace returns ctx carrying the client's W3C trace context for the
// call req (docs/operations.md#traces): `_meta.traceparent` and
// `_meta.tracestate` of the request (MCP 2026-07-28), else the
// traceparent and tracestate headers of its HTTP request. A tracer parses
// it, and ignores a malformed one.
func withTrace(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil || req.Params == nil {
		return ctx
	}
	if m := req.Params.Meta; m != nil {
		if tp, ok := m["traceparent"].(string); ok && tp != "" {
			ts, _ := m["tracestate"].(string)
			return ops.WithTraceContext(ctx, tp, ts)
		}
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if tp := req.Extra.Header.Get("traceparent"); tp != "" {
			return ops.WithTraceContext(ctx, tp, req.Extra.Header.Get("tracestate"))
		}
	}
	return ctx
}

// metricsPath is where the HTTP transport serves Options.Metrics.
const metricsPath = "/metrics"

// withMetrics serves Options.Metrics at GET /metrics, behind the same
// guard as the rest (the bearer token, the Host check), and everything
// else with next.
func (s *Server) withMetrics(next http.Handler) http.Handler {
	if s.opts.Metrics == nil {
		return next
	}
	m := s.guard(s.opts.Metrics)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == metricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			m.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
