package telemetry

// conch's own OTLP/HTTP trace exporter. The official one
// (otlptracehttp) takes its request type from the OTLP collector
// packages, which link gRPC and grpc-gateway: about 10 MB of conch's
// binary and 60 packages initialised at every start of conch, its inits
// and its agents included, for a feature that is off unless a collector
// is named. This one encodes the same messages (opentelemetry-proto's
// ExportTraceServiceRequest) with protowire, or as OTLP/JSON, and posts
// them as the OTLP/HTTP specification says, configured by the same
// OTEL_EXPORTER_OTLP_* variables (docs/operations.md#traces).

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// exporter posts spans to an OTLP/HTTP collector. It implements
// sdktrace.SpanExporter.
type exporter struct {
	url      string
	json     bool // http/json, else http/protobuf
	gzip     bool
	headers  map[string]string
	timeout  time.Duration
	client   *http.Client
	mu       sync.Mutex
	shutdown bool
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// otlpEnv reads OTEL_EXPORTER_OTLP_TRACES_<name>, else
// OTEL_EXPORTER_OTLP_<name>.
func otlpEnv(name string) string {
	if v := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
		return v
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_" + name)
}

// newExporter configures an exporter from the environment; endpoint, the
// collector's base URL, wins over the environment's endpoints when set.
// The protocol was checked by New (grpc is refused there).
func newExporter(endpoint string) (*exporter, error) {
	e := &exporter{headers: map[string]string{}, timeout: 10 * time.Second}
	switch {
	case endpoint != "":
		e.url = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
	case os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		e.url = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") // used as is
	default:
		e.url = strings.TrimSuffix(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	if u, err := url.Parse(e.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telemetry: otlp endpoint %q: want an http:// or https:// URL", e.url)
	}
	switch p := otlpEnv("PROTOCOL"); p {
	case "", "http/protobuf":
	case "http/json":
		e.json = true
	default:
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%s: conch sends OTLP over HTTP (http/protobuf or http/json)", p)
	}
	switch c := otlpEnv("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.gzip = true
	default:
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_COMPRESSION=%s: want gzip or none", c)
	}
	if v := otlpEnv("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_TIMEOUT=%s: want a positive number of milliseconds", v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	// Both lists apply, the traces' winning on a name (W3C baggage
	// format: name=value pairs, comma-separated, values percent-encoded).
	for _, list := range []string{os.Getenv("OTEL_EXPORTER_OTLP_HEADERS"), os.Getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")} {
		for _, kv := range strings.Split(list, ",") {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				continue
			}
			if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
				e.headers[k] = dv
			}
		}
	}
	tlsConf, err := otlpTLS()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConf != nil {
		tr.TLSClientConfig = tlsConf
	}
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// otlpTLS is the TLS configuration the certificate variables ask for
// (nil: the system's defaults): a CA file to trust, and a client
// certificate and key.
func otlpTLS() (*tls.Config, error) {
	ca, cert, key := otlpEnv("CERTIFICATE"), otlpEnv("CLIENT_CERTIFICATE"), otlpEnv("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_CERTIFICATE %s: no certificate in it", ca)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// errShutdown is ExportSpans's error after Shutdown.
var errShutdown = errors.New("telemetry: exporter shut down")

// ExportSpans implements sdktrace.SpanExporter: one request, retried
// while the collector answers that it is busy or unavailable (429, 502,
// 503, 504), within the timeout.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	down := e.shutdown
	e.mu.Unlock()
	if down {
		return errShutdown
	}
	if len(spans) == 0 {
		return nil
	}
	req := request(spans)
	var body []byte
	var err error
	contentType := "application/x-protobuf"
	if e.json {
		contentType = "application/json"
		if body, err = json.Marshal(req); err != nil {
			return fmt.Errorf("telemetry: encode spans: %w", err)
		}
	} else {
		body = req.appendProto(nil)
	}
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		retry, err := e.post(ctx, body, contentType)
		if !retry {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// post sends one request; retry says the collector asked for another.
func (e *exporter) post(ctx context.Context, body []byte, contentType string) (retry bool, err error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("telemetry: export spans: %w", err)
	}
	for k, v := range e.headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", contentType)
	if e.gzip {
		hr.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		return false, fmt.Errorf("telemetry: export spans: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return true, fmt.Errorf("telemetry: export spans: %s", resp.Status)
	}
	return false, fmt.Errorf("telemetry: export spans: %s", resp.Status)
}

// Shutdown implements sdktrace.SpanExporter.
func (e *exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}

// The OTLP messages conch sends (opentelemetry-proto, trace/v1 and
// common/v1), with their JSON names (OTLP/JSON) and their protobuf
// field numbers (appendProto).

type exportRequest struct {
	ResourceSpans []*resourceSpans `json:"resourceSpans"`
}

type resourceSpans struct {
	Resource   otlpResource  `json:"resource"`
	ScopeSpans []*scopeSpans `json:"scopeSpans"`
	SchemaURL  string        `json:"schemaUrl,omitempty"`
}

type otlpResource struct {
	Attributes []keyValue `json:"attributes,omitempty"`
}

type scopeSpans struct {
	Scope     scope   `json:"scope"`
	Spans     []*span `json:"spans"`
	SchemaURL string  `json:"schemaUrl,omitempty"`
}

type scope struct {
	Name       string     `json:"name,omitempty"`
	Version    string     `json:"version,omitempty"`
	Attributes []keyValue `json:"attributes,omitempty"`
}

type span struct {
	TraceID                string      `json:"traceId"` // hex, as OTLP/JSON has it
	SpanID                 string      `json:"spanId"`
	TraceState             string      `json:"traceState,omitempty"`
	ParentSpanID           string      `json:"parentSpanId,omitempty"`
	Flags                  uint32      `json:"flags,omitempty"`
	Name                   string      `json:"name"`
	Kind                   int         `json:"kind"`
	StartTimeUnixNano      uint64      `json:"startTimeUnixNano,string"`
	EndTimeUnixNano        uint64      `json:"endTimeUnixNano,string"`
	Attributes             []keyValue  `json:"attributes,omitempty"`
	DroppedAttributesCount uint32      `json:"droppedAttributesCount,omitempty"`
	Events                 []spanEvent `json:"events,omitempty"`
	DroppedEventsCount     uint32      `json:"droppedEventsCount,omitempty"`
	Links                  []spanLink  `json:"links,omitempty"`
	DroppedLinksCount      uint32      `json:"droppedLinksCount,omitempty"`
	Status                 *status     `json:"status,omitempty"`

	traceID, spanID, parentID []byte // the ids' bytes, for protobuf
}

type spanEvent struct {
	TimeUnixNano           uint64     `json:"timeUnixNano,string"`
	Name                   string     `json:"name"`
	Attributes             []keyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32     `json:"droppedAttributesCount,omitempty"`
}

type spanLink struct {
	TraceID                string     `json:"traceId"`
	SpanID                 string     `json:"spanId"`
	TraceState             string     `json:"traceState,omitempty"`
	Attributes             []keyValue `json:"attributes,omitempty"`
	DroppedAttributesCount uint32     `json:"droppedAttributesCount,omitempty"`
	Flags                  uint32     `json:"flags,omitempty"`

	traceID, spanID []byte
}

type status struct {
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

// anyValue is one of its fields; an empty one is an empty value.
type anyValue struct {
	String *string     `json:"stringValue,omitempty"`
	Bool   *bool       `json:"boolValue,omitempty"`
	Int    *int64      `json:"intValue,string,omitempty"`
	Double *float64    `json:"doubleValue,omitempty"`
	Array  *arrayValue `json:"arrayValue,omitempty"`
	KVList *kvList     `json:"kvlistValue,omitempty"`
	Bytes  []byte      `json:"bytesValue,omitempty"` // base64 in JSON, as OTLP/JSON has it
}

type arrayValue struct {
	Values []anyValue `json:"values"`
}

type kvList struct {
	Values []keyValue `json:"values"`
}

// request groups spans by resource and instrumentation scope.
func request(spans []sdktrace.ReadOnlySpan) *exportRequest {
	req := &exportRequest{}
	byRes := map[*resource.Resource]*resourceSpans{}
	type scopeKey struct {
		res   *resource.Resource
		scope instrumentation.Scope
	}
	byScope := map[scopeKey]*scopeSpans{}
	for _, s := range spans {
		res := s.Resource()
		rs := byRes[res]
		if rs == nil {
			rs = &resourceSpans{Resource: otlpResource{Attributes: keyValues(res.Attributes())}, SchemaURL: res.SchemaURL()}
			byRes[res] = rs
			req.ResourceSpans = append(req.ResourceSpans, rs)
		}
		is := s.InstrumentationScope()
		k := scopeKey{res, instrumentation.Scope{Name: is.Name, Version: is.Version, SchemaURL: is.SchemaURL}}
		ss := byScope[k]
		if ss == nil {
			ss = &scopeSpans{Scope: scope{Name: is.Name, Version: is.Version, Attributes: keyValues(is.Attributes.ToSlice())}, SchemaURL: is.SchemaURL}
			byScope[k] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, otlpSpan(s))
	}
	return req
}

func otlpSpan(s sdktrace.ReadOnlySpan) *span {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	o := &span{
		traceID: tid[:], spanID: sid[:],
		TraceID: tid.String(), SpanID: sid.String(),
		TraceState:             sc.TraceState().String(),
		Flags:                  spanFlags(sc.TraceFlags(), parent),
		Name:                   s.Name(),
		Kind:                   spanKind(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(0, s.DroppedAttributes())),
		DroppedEventsCount:     uint32(max(0, s.DroppedEvents())),
		DroppedLinksCount:      uint32(max(0, s.DroppedLinks())),
	}
	if parent.SpanID().IsValid() {
		pid := parent.SpanID()
		o.parentID, o.ParentSpanID = pid[:], pid.String()
	}
	for _, ev := range s.Events() {
		o.Events = append(o.Events, spanEvent{TimeUnixNano: unixNano(ev.Time), Name: ev.Name, Attributes: keyValues(ev.Attributes), DroppedAttributesCount: uint32(max(0, ev.DroppedAttributeCount))})
	}
	for _, l := range s.Links() {
		lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		o.Links = append(o.Links, spanLink{
			traceID: lt[:], spanID: ls[:], TraceID: lt.String(), SpanID: ls.String(),
			TraceState: l.SpanContext.TraceState().String(), Attributes: keyValues(l.Attributes),
			DroppedAttributesCount: uint32(max(0, l.DroppedAttributeCount)),
			Flags:                  spanFlags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	if st := s.Status(); st.Code != codes.Unset {
		o.Status = &status{Message: st.Description, Code: 1} // STATUS_CODE_OK
		if st.Code == codes.Error {
			o.Status.Code = 2 // STATUS_CODE_ERROR
		}
	}
	return o
}

// spanFlags are a span's (or a link's) OTLP flags: the W3C trace flags,
// and whether the parent (or the linked span) is remote.
func spanFlags(tf trace.TraceFlags, other trace.SpanContext) uint32 {
	const hasIsRemote, isRemote = 0x100, 0x200
	f := uint32(tf) | hasIsRemote
	if other.IsRemote() {
		f |= isRemote
	}
	return f
}

// spanKind is k's OTLP number (SPAN_KIND_INTERNAL is 1 …), the same as
// OpenTelemetry Go's.
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(max(0, t.UnixNano()))
}

func keyValues(kvs []attribute.KeyValue) []keyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]keyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, keyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func value(v attribute.Value) anyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return anyValue{Bool: &b}
	case attribute.INT64:
		n := v.AsInt64()
		return anyValue{Int: &n}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return anyValue{Double: &f}
	case attribute.STRING:
		s := v.AsString()
		return anyValue{String: &s}
	case attribute.BYTESLICE:
		return anyValue{Bytes: v.AsByteSlice()}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) anyValue { return anyValue{Bool: &b} })
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(n int64) anyValue { return anyValue{Int: &n} })
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) anyValue { return anyValue{Double: &f} })
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) anyValue { return anyValue{String: &s} })
	case attribute.SLICE:
		return array(v.AsSlice(), value)
	case attribute.MAP:
		return anyValue{KVList: &kvList{Values: keyValues(v.AsMap())}}
	}
	return anyValue{}
}

func array[T any](vs []T, f func(T) anyValue) anyValue {
	a := &arrayValue{Values: make([]anyValue, 0, len(vs))}
	for _, v := range vs {
		a.Values = append(a.Values, f(v))
	}
	return anyValue{Array: a}
}

// Protobuf encoding: each message appends its fields (numbers from
// opentelemetry-proto) to b, in the wire format of
// https://protobuf.dev/programming-guides/encoding/. It is written here,
// not taken from google.golang.org/protobuf's protowire: that package's
// initialisation opens and reads the running binary (internal/detrand),
// a cost every conch process, init and agent would pay at its start.

// wireNumber is a field's number; wire* are the wire types conch writes.
type wireNumber int32

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendTag(b []byte, num wireNumber, typ int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(typ))
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendLenBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func appendLenString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func encodeBool(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func appendString(b []byte, num wireNumber, s string) []byte {
	if s == "" {
		return b
	}
	b = appendTag(b, num, wireBytes)
	return appendLenString(b, s)
}

func appendBytes(b []byte, num wireNumber, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = appendTag(b, num, wireBytes)
	return appendLenBytes(b, v)
}

func appendVarint(b []byte, num wireNumber, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, wireVarint)
	return appendUvarint(b, v)
}

func appendFixed64(b []byte, num wireNumber, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, wireFixed64)
	return binary.LittleEndian.AppendUint64(b, v)
}

func appendFixed32(b []byte, num wireNumber, v uint32) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, wireFixed32)
	return binary.LittleEndian.AppendUint32(b, v)
}

// appendMessage appends a field holding the message enc appends.
func appendMessage(b []byte, num wireNumber, enc func([]byte) []byte) []byte {
	b = appendTag(b, num, wireBytes)
	return appendLenBytes(b, enc(nil))
}

func appendKeyValues(b []byte, num wireNumber, kvs []keyValue) []byte {
	for _, kv := range kvs {
		b = appendMessage(b, num, kv.appendProto)
	}
	return b
}

func (r *exportRequest) appendProto(b []byte) []byte {
	for _, rs := range r.ResourceSpans {
		b = appendMessage(b, 1, rs.appendProto)
	}
	return b
}

func (rs *resourceSpans) appendProto(b []byte) []byte {
	b = appendMessage(b, 1, func(b []byte) []byte { return appendKeyValues(b, 1, rs.Resource.Attributes) })
	for _, ss := range rs.ScopeSpans {
		b = appendMessage(b, 2, ss.appendProto)
	}
	return appendString(b, 3, rs.SchemaURL)
}

func (ss *scopeSpans) appendProto(b []byte) []byte {
	b = appendMessage(b, 1, func(b []byte) []byte {
		b = appendString(b, 1, ss.Scope.Name)
		b = appendString(b, 2, ss.Scope.Version)
		return appendKeyValues(b, 3, ss.Scope.Attributes)
	})
	for _, s := range ss.Spans {
		b = appendMessage(b, 2, s.appendProto)
	}
	return appendString(b, 3, ss.SchemaURL)
}

func (s *span) appendProto(b []byte) []byte {
	b = appendBytes(b, 1, s.traceID)
	b = appendBytes(b, 2, s.spanID)
	b = appendString(b, 3, s.TraceState)
	b = appendBytes(b, 4, s.parentID)
	b = appendString(b, 5, s.Name)
	b = appendVarint(b, 6, uint64(s.Kind))
	b = appendFixed64(b, 7, s.StartTimeUnixNano)
	b = appendFixed64(b, 8, s.EndTimeUnixNano)
	b = appendKeyValues(b, 9, s.Attributes)
	b = appendVarint(b, 10, uint64(s.DroppedAttributesCount))
	for _, ev := range s.Events {
		b = appendMessage(b, 11, func(b []byte) []byte {
			b = appendFixed64(b, 1, ev.TimeUnixNano)
			b = appendString(b, 2, ev.Name)
			b = appendKeyValues(b, 3, ev.Attributes)
			return appendVarint(b, 4, uint64(ev.DroppedAttributesCount))
		})
	}
	b = appendVarint(b, 12, uint64(s.DroppedEventsCount))
	for _, l := range s.Links {
		b = appendMessage(b, 13, func(b []byte) []byte {
			b = appendBytes(b, 1, l.traceID)
			b = appendBytes(b, 2, l.spanID)
			b = appendString(b, 3, l.TraceState)
			b = appendKeyValues(b, 4, l.Attributes)
			b = appendVarint(b, 5, uint64(l.DroppedAttributesCount))
			return appendFixed32(b, 6, l.Flags)
		})
	}
	b = appendVarint(b, 14, uint64(s.DroppedLinksCount))
	if s.Status != nil {
		b = appendMessage(b, 15, func(b []byte) []byte {
			b = appendString(b, 2, s.Status.Message)
			return appendVarint(b, 3, uint64(s.Status.Code))
		})
	}
	return appendFixed32(b, 16, s.Flags)
}

func (kv keyValue) appendProto(b []byte) []byte {
	b = appendString(b, 1, kv.Key)
	return appendMessage(b, 2, kv.Value.appendProto)
}

// appendProto appends v's one field; an empty value has none. Unlike the
// other fields, a zero or empty one of the oneof is written: it is set.
func (v anyValue) appendProto(b []byte) []byte {
	switch {
	case v.String != nil:
		b = appendTag(b, 1, wireBytes)
		return appendLenString(b, *v.String)
	case v.Bool != nil:
		b = appendTag(b, 2, wireVarint)
		return appendUvarint(b, encodeBool(*v.Bool))
	case v.Int != nil:
		b = appendTag(b, 3, wireVarint)
		return appendUvarint(b, uint64(*v.Int))
	case v.Double != nil:
		b = appendTag(b, 4, wireFixed64)
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(*v.Double))
	case v.Array != nil:
		return appendMessage(b, 5, func(b []byte) []byte {
			for _, e := range v.Array.Values {
				b = appendMessage(b, 1, e.appendProto)
			}
			return b
		})
	case v.KVList != nil:
		return appendMessage(b, 6, func(b []byte) []byte { return appendKeyValues(b, 1, v.KVList.Values) })
	case v.Bytes != nil:
		b = appendTag(b, 7, wireBytes)
		return appendLenBytes(b, v.Bytes)
	}
	return b
}
