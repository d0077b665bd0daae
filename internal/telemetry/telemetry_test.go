//go:build linux

package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/conch-dev/conch/internal/telemetry"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/ops"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// receiver is an OTLP/HTTP trace receiver: it decodes what it gets with
// the protocol's own protobuf types.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	res   []*commonpb.KeyValue
	paths []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request", 400)
			return
		}
		var msg collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		for _, rs := range msg.ResourceSpans {
			r.res = append(r.res, rs.Resource.GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() ([]*tracepb.Span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]string(nil), r.paths...)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.Value
		switch {
		case v.GetStringValue() != "":
			m[kv.Key] = v.GetStringValue()
		case v.GetBoolValue():
			m[kv.Key] = "true"
		default:
			if _, ok := v.Value.(*commonpb.AnyValue_IntValue); ok {
				m[kv.Key] = strconv.FormatInt(v.GetIntValue(), 10)
			}
		}
	}
	return m
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	secret      = "s3cr3t-output-and-env"
)

// call plays one bash call through the tracer as the tools layer will:
// the call, the rule check, a question, the spawn and the run.
func call(ctx context.Context, rec ops.Recorder) {
	ctx, endCall := ops.Start(ctx, rec, ops.PhaseCall)
	rec.Record(ctx, ops.Call{Owner: "s1", CallID: "c1", Tool: "bash", Command: "echo " + secret})
	rctx, end := ops.Start(ctx, rec, ops.PhaseRules)
	rec.Record(rctx, ops.Decision{Owner: "s1", Decision: "ask", Rule: "Bash(echo:*)", Command: "echo " + secret})
	end()
	qctx, end := ops.Start(ctx, rec, ops.PhaseQuestion)
	rec.Record(qctx, ops.Question{Owner: "s1", Kind: "rule", Subject: "echo " + secret})
	rec.Record(qctx, ops.Answer{Owner: "s1", Kind: "rule", Choice: "allow_once", AnsweredBy: "user"})
	end()
	sctx, end := ops.Start(ctx, rec, ops.PhaseSpawn)
	rec.Record(sctx, ops.Spawn{Owner: "s1", Sandbox: "workspace-write"})
	end()
	xctx, end := ops.Start(ctx, rec, ops.PhaseRun)
	rec.Record(xctx, ops.Denied{Owner: "s1", Path: "/etc/" + secret, Op: "write", Reason: "read-only"})
	rec.Record(xctx, ops.Process{Owner: "s1", ExitCode: 3, Duration: time.Millisecond, OutputBytes: 9})
	end()
	rec.Record(ctx, ops.CallEnd{Owner: "s1", Tool: "bash", Result: "error", Duration: 2 * time.Millisecond})
	endCall()
}

// TestSpans: a real OTLP/HTTP receiver gets the spans of a call, joined
// to the client's trace: the call's parent is the client's span, the
// phases are the call's children, and the attributes name the tool, the
// decision, the sandbox and the exit code, never the command, its output
// or its environment.
func TestSpans(t *testing.T) {
	recv := newReceiver(t)
	tr, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: recv.URL, Version: "test"})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	ctx := ops.WithTraceContext(context.Background(), "00-"+clientTrace+"-"+clientSpan+"-01", "vendor=x")
	call(ctx, tr)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, paths := recv.got()
	if len(spans) != 5 || len(paths) == 0 || paths[0] != "/v1/traces" {
		t.Fatalf("%d spans at %v, want 5 at /v1/traces", len(spans), paths)
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
		if hex.EncodeToString(s.TraceId) != clientTrace {
			t.Errorf("span %s: trace %x, want the client's %s", s.Name, s.TraceId, clientTrace)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("span %s: attribute %s carries the command's text: %v", s.Name, kv.Key, kv.Value)
			}
		}
		for _, ev := range s.Events {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s: event %s carries the command's text", s.Name, ev.Name)
				}
			}
		}
	}
	root := byName["execute_tool bash"]
	if root == nil {
		t.Fatalf("no span execute_tool bash among %v", byName)
	}
	if hex.EncodeToString(root.ParentSpanId) != clientSpan || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("call span: parent %x kind %v, want the client's %s and a server span", root.ParentSpanId, root.Kind, clientSpan)
	}
	if root.TraceState != "vendor=x" {
		t.Errorf("call span: trace state %q", root.TraceState)
	}
	want := map[string]string{"gen_ai.tool.name": "bash", "gen_ai.operation.name": "execute_tool", "conch.session.id": "s1",
		"conch.rules.decision": "ask", "conch.sandbox": "workspace-write", "process.exit.code": "3", "conch.result": "error",
		"conch.sandbox.denied": "true"}
	got := attrs(root.Attributes)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("call span: %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if root.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("call span status %v, want an error", root.Status)
	}
	for _, name := range []string{"conch.rules", "conch.question", "conch.spawn", "conch.run"} {
		s := byName[name]
		if s == nil {
			t.Errorf("no span %s", name)
			continue
		}
		if !bytes.Equal(s.ParentSpanId, root.SpanId) {
			t.Errorf("span %s: parent %x, want the call %x", name, s.ParentSpanId, root.SpanId)
		}
	}
	if a := attrs(byName["conch.question"].GetAttributes()); a["conch.answer.choice"] != "allow_once" || a["conch.answer.by"] != "user" {
		t.Errorf("question span: %v", a)
	}
	if ev := byName["conch.run"].GetEvents(); len(ev) != 1 || ev[0].Name != "conch.sandbox.denied" || attrs(ev[0].Attributes)["conch.sandbox.reason"] != "read-only" {
		t.Errorf("run span events: %v", ev)
	}
}

// TestEnvironment: the standard variables configure it: the endpoint,
// the service name, a sampler that follows the client's "not sampled",
// and a malformed traceparent that starts a trace of conch's own.
func TestEnvironment(t *testing.T) {
	recv := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "conch-test")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	tr, err := telemetry.New(context.Background(), nil)
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	call(ops.WithTraceContext(context.Background(), "00-"+clientTrace+"-"+clientSpan+"-00", ""), tr) // not sampled
	call(ops.WithTraceContext(context.Background(), "not a traceparent", ""), tr)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _ := recv.got()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want the 5 of the call with a malformed traceparent", len(spans))
	}
	for _, s := range spans {
		if hex.EncodeToString(s.TraceId) == clientTrace {
			t.Errorf("span %s joined a trace the client did not sample", s.Name)
		}
		if s.Name == "execute_tool bash" && (len(s.ParentSpanId) != 0 || s.Kind != tracepb.Span_SPAN_KIND_INTERNAL) {
			t.Errorf("call span of a malformed traceparent: parent %x, kind %v; want a root", s.ParentSpanId, s.Kind)
		}
	}
	recv.mu.Lock()
	res := attrs(recv.res)
	recv.mu.Unlock()
	if res["service.name"] != "conch-test" {
		t.Errorf("resource: %v", res)
	}
}

func TestOff(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(v, "")
	}
	if tr, err := telemetry.New(context.Background(), nil); tr != nil || err != nil {
		t.Errorf("New with nothing configured: %v, %v; want nil, nil", tr, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if telemetry.Configured("") {
		t.Error("Configured with OTEL_SDK_DISABLED=true")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := telemetry.New(context.Background(), nil); err == nil {
		t.Error("New with OTEL_EXPORTER_OTLP_PROTOCOL=grpc: no error")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	if _, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: "127.0.0.1:4318"}); err == nil {
		t.Error("an endpoint without a scheme: no error")
	}
}

// TestJSONAndHeaders: with OTEL_EXPORTER_OTLP_PROTOCOL=http/json the
// spans go as OTLP/JSON (ids in hex, 64-bit integers as strings), to the
// traces endpoint as given, with the headers of both header variables
// (the traces' winning on a name, values percent-decoded).
func TestJSONAndHeaders(t *testing.T) {
	type jspan struct {
		TraceID      string `json:"traceId"`
		ParentSpanID string `json:"parentSpanId"`
		Name         string `json:"name"`
		Kind         int    `json:"kind"`
		Start        string `json:"startTimeUnixNano"`
		Attributes   []struct {
			Key   string         `json:"key"`
			Value map[string]any `json:"value"`
		} `json:"attributes"`
	}
	var (
		mu      sync.Mutex
		spans   []jspan
		headers []http.Header
		paths   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var msg struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []jspan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if req.Header.Get("Content-Type") != "application/json" || json.NewDecoder(req.Body).Decode(&msg) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		headers, paths = append(headers, req.Header), append(paths, req.URL.Path)
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/collector/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "X-Token=a%20b, X-Other=1")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-Other=2")
	tr, err := telemetry.New(context.Background(), nil)
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	call(ops.WithTraceContext(context.Background(), "00-"+clientTrace+"-"+clientSpan+"-01", ""), tr)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(spans) != 5 || paths[0] != "/collector/traces" {
		t.Fatalf("%d spans at %v, want 5 at /collector/traces", len(spans), paths)
	}
	if h := headers[0]; h.Get("X-Token") != "a b" || h.Get("X-Other") != "2" {
		t.Errorf("headers: X-Token %q, X-Other %q; want \"a b\" and \"2\"", h.Get("X-Token"), h.Get("X-Other"))
	}
	var root *jspan
	for k, s := range spans {
		if s.TraceID != clientTrace {
			t.Errorf("span %s: trace %q, want the client's %s in hex", s.Name, s.TraceID, clientTrace)
		}
		if _, err := strconv.ParseUint(s.Start, 10, 64); err != nil {
			t.Errorf("span %s: startTimeUnixNano %q, want a decimal string", s.Name, s.Start)
		}
		if s.Name == "execute_tool bash" {
			root = &spans[k]
		}
	}
	if root == nil || root.ParentSpanID != clientSpan || root.Kind != 2 {
		t.Fatalf("call span %+v: want the client's parent %s, kind 2 (server)", root, clientSpan)
	}
	exit := ""
	for _, a := range root.Attributes {
		if a.Key == "process.exit.code" {
			exit, _ = a.Value["intValue"].(string)
		}
	}
	if exit != "3" {
		t.Errorf("process.exit.code: %q, want the string \"3\" (OTLP/JSON's int64)", exit)
	}
}

// TestRetry: a collector that answers 503 (unavailable) gets the same
// spans again, and they arrive once.
func TestRetry(t *testing.T) {
	recv := newReceiver(t)
	var mu sync.Mutex
	refused := 0
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		first := refused == 0
		if first {
			refused++
		}
		mu.Unlock()
		if first {
			io.Copy(io.Discard, req.Body)
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		recv.Config.Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(busy.Close)
	tr, err := telemetry.New(context.Background(), &telemetry.Options{Endpoint: busy.URL})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	call(context.Background(), tr)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans, _ := recv.got(); refused != 1 || len(spans) != 5 {
		t.Errorf("%d refused, then %d spans; want 1, then the call's 5", refused, len(spans))
	}
}

// TestNoGRPC: conch's binary does not link gRPC, which the official
// OTLP exporters bring through the OTLP collector packages (about 10 MB
// of the binary and 60 packages initialised at every start).
func TestNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/conch-dev/conch/cmd/conch").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "google.golang.org/grpc") || strings.HasPrefix(pkg, "go.opentelemetry.io/proto/otlp/collector") {
			t.Errorf("cmd/conch imports %s", pkg)
		}
	}
}
