//go:build linux

package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/conch-dev/conch/internal/testutil"
)

// otlpReceiver is an OTLP/HTTP collector on 127.0.0.1: it decodes every
// export (protobuf) and keeps the spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		var msg collectortrace.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(b, &msg) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range msg.ResourceSpans {
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

func (r *otlpReceiver) got() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// mcpPost posts a JSON-RPC body to the server with the token, the session
// and the extra headers, and returns the status and body.
func mcpPost(t *testing.T, url, token, session, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Close = true
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestOperationsWired: `conch serve --http` with an audit log, an OTLP
// collector and rules records the calls of a real MCP client from the
// outside: the audit file holds the call, decision, denied, process and
// kill lines of each call, with the token typed into a command redacted,
// and `conch audit verify` accepts it; the collector gets each call's
// span with its phases, as the child of the client's trace context sent
// in `_meta.traceparent` or in the traceparent header; /metrics, behind
// the token, counts the calls by result, the spawns, the denials and the
// inits. A command cannot read the audit log, although it was made after
// the server started.
func TestOperationsWired(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	recv := newOTLPReceiver(t)
	cfgHome, logs := t.TempDir(), t.TempDir()
	auditPath := filepath.Join(logs, "audit", "audit.jsonl")
	if err := os.MkdirAll(filepath.Join(cfgHome, "conch"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "[rules]\ndeny = [\"Bash(rm -rf:*)\"]\n[audit]\npath = \"" + auditPath + "\"\n"
	if err := os.WriteFile(filepath.Join(cfgHome, "conch", "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "ops-wired-token"
	srv := startHTTPServe(t, marker, "127.0.0.1:0", "CONCH_TOKEN="+token, "XDG_CONFIG_HOME="+cfgHome,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL, "CONCH_SANDBOX=workspace-write")
	resp, body := mcpPost(t, srv.url, token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ops","version":"0"}}}`, nil)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %s %q", resp.Status, body)
	}
	mcpPost(t, srv.url, token, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	id := 1
	call := func(tool string, args map[string]any, meta map[string]any, header map[string]string) string {
		t.Helper()
		id++
		params := map[string]any{"name": tool, "arguments": args}
		if meta != nil {
			params["_meta"] = meta
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
		resp, body := mcpPost(t, srv.url, token, session, string(b), header)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/call %s: %s %q", tool, resp.Status, body)
		}
		return body
	}
	bash := func(command string, meta map[string]any, header map[string]string) string {
		return call("bash", map[string]any{"command": command, "description": "x"}, meta, header)
	}

	const (
		traceMeta   = "0af7651916cd43dd8448eb211c80319c"
		traceHeader = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent      = "b7ad6b7169203331"
		secret      = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	)
	if out := bash("echo hi", map[string]any{"traceparent": "00-" + traceMeta + "-" + parent + "-01"}, nil); !strings.Contains(out, `hi\n`) {
		t.Fatalf("echo hi: %s", out)
	}
	bash("echo GITHUB_TOKEN="+secret+"; touch /etc/conch-ops-wired", nil, map[string]string{"traceparent": "00-" + traceHeader + "-" + parent + "-01"})
	if out := bash("rm -rf /nothing", nil, nil); !strings.Contains(out, "denied by rule") {
		t.Errorf("rm -rf: %s", out)
	}
	if out := bash("cat "+auditPath+"; ls -a "+filepath.Dir(auditPath), nil, nil); strings.Contains(out, `\"seq\"`) || strings.Contains(out, "audit.jsonl") && !strings.Contains(out, "No such file") {
		t.Errorf("a command read the audit log: %s", out)
	}
	out := call("bash", map[string]any{"command": "sleep 600", "description": "x", "run_in_background": true}, nil, nil)
	_, rest, _ := strings.Cut(out, "started background task ")
	task, _, _ := strings.Cut(rest, `"`)
	if !strings.HasPrefix(task, "bash-") {
		t.Fatalf("background: %s", out)
	}
	call("task_kill", map[string]any{"task_id": task}, nil, nil)

	// /metrics: behind the token, then parsed.
	metricsURL := strings.TrimSuffix(srv.url, "/mcp") + "/metrics"
	if resp, err := http.Get(metricsURL); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %v %v, want 401", resp.Status, err)
	} else {
		resp.Body.Close()
	}
	mresp, err := withToken(token).Get(metricsURL)
	if err != nil || mresp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %v %v", mresp, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(mresp.Body)
	mresp.Body.Close()
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	// value sums the series of name that have labels.
	value := func(name string, labels ...string) float64 {
		f := fams[name]
		if f == nil {
			return -1
		}
		sum := 0.0
	next:
		for _, m := range f.Metric {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, l := range m.Label {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"conch_tool_calls_total", []string{"tool", "bash", "result", "ok"}, 2}, // echo hi, the background start is "background"
		{"conch_tool_calls_total", []string{"tool", "bash", "result", "denied"}, 1},
		{"conch_tool_calls_total", []string{"tool", "bash", "result", "error"}, 1}, // cat of a missing file
		{"conch_tool_calls_total", []string{"tool", "bash", "result", "background"}, 1},
		{"conch_tool_calls_total", []string{"tool", "task_kill", "result", "ok"}, 1},
		{"conch_tool_call_duration_seconds", []string{"tool", "bash"}, 5},
		{"conch_spawns_total", []string{"host", "local"}, 4},
		{"conch_denials_total", []string{"reason", "rule"}, 1},
		{"conch_inits_total", []string{"result", "ok"}, 1},
	} {
		if got := value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value("conch_denials_total"); got != 2 {
		t.Errorf("conch_denials_total = %v, want the rule's and the sandbox's write", got)
	}

	srv.stop() // writes the audit log's queue and sends the spans

	data, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Errorf("the token typed into a command is in the audit log:\n%s", data)
	}
	var kinds []string
	var sawDenied, sawRedacted, sawKill, sawProcess bool
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		kinds = append(kinds, l["event"].(string))
		switch l["event"] {
		case "denied":
			sawDenied = sawDenied || l["path"] == "/etc/conch-ops-wired" && l["op"] == "write"
		case "call":
			sawRedacted = sawRedacted || l["command"] == "echo GITHUB_TOKEN=[redacted]; touch /etc/conch-ops-wired"
		case "kill":
			sawKill = l["task"] == task && l["reason"] == "task_kill"
		case "process":
			sawProcess = sawProcess || l["exit_code"] == 0.0 && l["output_bytes"] == 3.0
		}
		if l["owner"] == "" || l["event"] != "kill" && l["call_id"] == nil {
			t.Errorf("audit line without its owner or call: %s", line)
		}
	}
	if !sawDenied || !sawRedacted || !sawKill || !sawProcess {
		t.Errorf("denied %v, redacted call %v, kill %v, echo's process %v in the audit log:\n%s", sawDenied, sawRedacted, sawKill, sawProcess, data)
	}
	if got := strings.Join(kinds[:3], " "); got != "call decision process" {
		t.Errorf("the first call's lines: %s, want call decision process", got)
	}
	verify := exec.Command(testutil.ConchBinary(t), "audit", "verify", auditPath)
	if out, err := verify.CombinedOutput(); err != nil || !strings.Contains(string(out), "the audit log verifies") {
		t.Errorf("conch audit verify: %v\n%s", err, out)
	}

	spans := recv.got()
	for _, want := range []string{traceMeta, traceHeader} {
		var root *tracepb.Span
		children := map[string]bool{}
		for _, s := range spans {
			if hex.EncodeToString(s.TraceId) != want {
				continue
			}
			if s.Name == "execute_tool bash" {
				root = s
			} else {
				children[s.Name] = true
			}
		}
		if root == nil {
			t.Errorf("no execute_tool bash span in trace %s (%d spans in all)", want, len(spans))
			continue
		}
		if hex.EncodeToString(root.ParentSpanId) != parent || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("trace %s: call span's parent %x kind %v, want %s server", want, root.ParentSpanId, root.Kind, parent)
		}
		for _, c := range []string{"conch.rules", "conch.spawn", "conch.run"} {
			if !children[c] {
				t.Errorf("trace %s: no %s span (have %v)", want, c, children)
			}
		}
		for _, a := range root.Attributes {
			if v := a.Value.GetStringValue(); strings.Contains(v, "echo") {
				t.Errorf("trace %s: attribute %s carries the command: %q", want, a.Key, v)
			}
		}
	}
}
