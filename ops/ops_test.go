package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/conch-dev/conch/ops"
)

// drawEvent draws any event with arbitrary field values.
func drawEvent(t *rapid.T) ops.Event {
	s := func(name string) string { return rapid.String().Draw(t, name) }
	b := func(name string) bool { return rapid.Bool().Draw(t, name) }
	d := time.Duration(rapid.Int64Range(0, 1e15).Draw(t, "us")) * time.Microsecond
	switch rapid.IntRange(0, 10).Draw(t, "kind") {
	case 0:
		return ops.Call{Owner: s("owner"), CallID: s("id"), Tool: s("tool"), Command: s("command"), Workdir: s("workdir"),
			Host: s("host"), TTY: b("tty"), Background: b("bg"), Task: s("task")}
	case 1:
		return ops.Decision{Owner: s("owner"), CallID: s("id"), Decision: s("d"), Rule: s("rule"), Command: s("cmd"), Reason: s("reason")}
	case 2:
		return ops.Question{Owner: s("owner"), CallID: s("id"), Kind: s("kind"), Subject: s("subject"), Reason: s("reason")}
	case 3:
		return ops.Answer{Owner: s("owner"), CallID: s("id"), Kind: s("kind"), Choice: s("choice"), AnsweredBy: s("by")}
	case 4:
		return ops.Grant{Owner: s("owner"), CallID: s("id"), Kind: s("kind"), Subject: s("subject"), Scope: s("scope")}
	case 5:
		return ops.Denied{Owner: s("owner"), CallID: s("id"), Task: s("task"), Host: s("host"), Path: s("path"),
			Destination: s("dest"), Op: s("op"), Reason: s("reason")}
	case 6:
		p := ops.Process{Owner: s("owner"), CallID: s("id"), Task: s("task"), Host: s("host"), TimedOut: b("to"),
			Duration: d, OutputBytes: rapid.Int64().Draw(t, "bytes")}
		if b("signalled") {
			p.Signal = "SIG" + rapid.StringMatching(`[A-Z]{1,6}`).Draw(t, "sig")
		} else {
			p.ExitCode = rapid.Int().Draw(t, "code")
		}
		return p
	case 7:
		return ops.Kill{Owner: s("owner"), Task: s("task"), Host: s("host"), Reason: s("reason"), Processes: rapid.Int().Draw(t, "n")}
	case 8:
		return ops.CallEnd{Owner: s("owner"), CallID: s("id"), Tool: s("tool"), Result: s("result"), Duration: d}
	case 9:
		return ops.Spawn{Owner: s("owner"), CallID: s("id"), Task: s("task"), Host: s("host"), Sandbox: s("sandbox")}
	default:
		return ops.Init{Owner: s("owner"), Host: s("host"), Result: s("result"), Duration: d}
	}
}

// TestMarshalRoundTrip: an event's JSON form is valid JSON that reads
// back as the same event (for valid UTF-8 text).
func TestMarshalRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := drawEvent(t)
		b := ops.Marshal(e)
		if !json.Valid(b) {
			t.Fatalf("Marshal(%#v) = %s: not JSON", e, b)
		}
		got, err := ops.Unmarshal(b)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if d := cmp.Diff(e, got); d != "" {
			t.Fatalf("round trip of %s (-want +got):\n%s", b, d)
		}
	})
}

// TestAppendString: the hand-written string encoder reads back, through
// encoding/json, as the string (invalid UTF-8 as U+FFFD), and never
// writes a raw control character or line separator.
func TestAppendString(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes"))
		if rapid.Bool().Draw(t, "text") {
			s = rapid.String().Draw(t, "s")
		}
		b := ops.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); utf8.ValidString(s) && back != s || !utf8.ValidString(s) && back != fixInvalid(s) {
			t.Fatalf("AppendString(%q) reads back as %q (want %q)", s, back, want)
		}
		for _, c := range b {
			if c < 0x20 {
				t.Fatalf("AppendString(%q) = %q has a raw control byte", s, b)
			}
		}
		if strings.ContainsAny(string(b), "\u2028\u2029") {
			t.Fatalf("AppendString(%q) = %q has a raw line separator", s, b)
		}
	})
}

// fixInvalid replaces each invalid byte with U+FFFD, as encoding/json
// does (strings.ToValidUTF8 would merge runs of them).
func fixInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

func TestMarshalPinned(t *testing.T) {
	for _, c := range []struct {
		e    ops.Event
		want string
	}{
		{ops.Call{Owner: "s1", Tool: "bash", Command: "ls\n", Background: true},
			`{"event":"call","owner":"s1","tool":"bash","command":"ls\n","background":true}`},
		{ops.Process{Owner: "s1", Task: "bash-1", Duration: 1500 * time.Microsecond},
			`{"event":"process","owner":"s1","task":"bash-1","exit_code":0,"duration_ms":1.5,"output_bytes":0}`},
		{ops.Process{Owner: "s1", Signal: "SIGKILL", TimedOut: true, Duration: 2 * time.Second, OutputBytes: 7},
			`{"event":"process","owner":"s1","signal":"SIGKILL","timed_out":true,"duration_ms":2000,"output_bytes":7}`},
		{ops.Answer{Owner: "s2", Kind: "escalation", Choice: "cancel", AnsweredBy: "client"},
			`{"event":"answer","owner":"s2","kind":"escalation","choice":"cancel","answered_by":"client"}`},
	} {
		if got := string(ops.Marshal(c.e)); got != c.want {
			t.Errorf("Marshal(%#v)\n got %s\nwant %s", c.e, got, c.want)
		}
	}
	if _, err := ops.Unmarshal([]byte(`{"event":"nope"}`)); err == nil {
		t.Error("Unmarshal of an unknown kind: no error")
	}
}

func TestAudited(t *testing.T) {
	var audited []ops.Kind
	for _, k := range []ops.Kind{ops.KindCall, ops.KindDecision, ops.KindQuestion, ops.KindAnswer, ops.KindDenied,
		ops.KindProcess, ops.KindKill, ops.KindGrant, ops.KindCallEnd, ops.KindSpawn, ops.KindInit} {
		if k.Audited() {
			audited = append(audited, k)
		}
	}
	want := []ops.Kind{"call", "decision", "question", "answer", "denied", "process", "kill", "grant"}
	if d := cmp.Diff(want, audited); d != "" {
		t.Errorf("audited kinds (-want +got):\n%s", d)
	}
}

func TestRedact(t *testing.T) {
	up := strings.ToUpper
	got := ops.Redact(ops.Call{Owner: "s1", Tool: "bash", Command: "a", Workdir: "b", Host: "h"}, up)
	if want := (ops.Call{Owner: "s1", Tool: "bash", Command: "A", Workdir: "B", Host: "h"}); got != want {
		t.Errorf("Redact: %#v, want %#v", got, want)
	}
	got = ops.Redact(ops.Denied{Owner: "s", Path: "p", Destination: "d", Op: "write", Reason: "r"}, up)
	if want := (ops.Denied{Owner: "s", Path: "P", Destination: "D", Op: "write", Reason: "R"}); got != want {
		t.Errorf("Redact: %#v, want %#v", got, want)
	}
}

// collector records events and, if spans is set, traces.
type collector struct {
	events []ops.Event
	starts []ops.Phase
}

func (c *collector) Record(_ context.Context, e ops.Event) { c.events = append(c.events, e) }

type spanner struct{ *collector }

func (s spanner) Start(ctx context.Context, p ops.Phase) (context.Context, func()) {
	s.starts = append(s.starts, p)
	return ctx, func() {}
}

func TestTee(t *testing.T) {
	if ops.Tee() != nil || ops.Tee(nil, nil) != nil {
		t.Error("Tee of nothing is not nil")
	}
	a := &collector{}
	if ops.Tee(nil, a) != ops.Recorder(a) {
		t.Error("Tee of one is not that one")
	}
	b := &collector{}
	s := spanner{b}
	r := ops.Tee(a, s, nil)
	ctx, end := ops.Start(context.Background(), r, ops.PhaseCall)
	r.Record(ctx, ops.Call{Owner: "s1"})
	end()
	if len(a.events) != 1 || len(b.events) != 1 || len(b.starts) != 1 || b.starts[0] != ops.PhaseCall {
		t.Errorf("Tee: %v %v %v", a.events, b.events, b.starts)
	}
}

// TestOffCostsNothing: with no Recorder, Start allocates nothing and
// hands back the caller's context.
func TestOffCostsNothing(t *testing.T) {
	ctx := context.Background()
	var rec ops.Recorder
	allocs := testing.AllocsPerRun(1000, func() {
		c, end := ops.Start(ctx, rec, ops.PhaseRun)
		end()
		if c != ctx {
			t.Fatal("Start changed the context")
		}
	})
	if allocs != 0 {
		t.Errorf("Start with a nil Recorder: %v allocations, want 0", allocs)
	}
	if got := ops.WithTraceContext(ctx, "", "x"); got != ctx {
		t.Error("WithTraceContext without a traceparent changed the context")
	}
	tc, ok := ops.TraceContextFrom(ops.WithTraceContext(ctx, "00-a-b-01", "k=v"))
	if !ok || tc.Traceparent != "00-a-b-01" || tc.Tracestate != "k=v" {
		t.Errorf("TraceContextFrom: %+v %v", tc, ok)
	}
}

func TestCallIDContext(t *testing.T) {
	ctx := context.Background()
	if id := ops.CallIDFrom(ctx); id != "" {
		t.Errorf("CallIDFrom(background) = %q", id)
	}
	if id := ops.CallIDFrom(ops.WithCallID(ctx, "c1")); id != "c1" {
		t.Errorf("CallIDFrom = %q, want c1", id)
	}
}

func TestNewCallID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := ops.NewCallID()
		if len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" || seen[id] {
			t.Fatalf("NewCallID() = %q (repeat: %v)", id, seen[id])
		}
		seen[id] = true
	}
}
