//go:build linux

package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"pgregory.net/rapid"

	"github.com/conch-dev/conch/internal/audit"
	"github.com/conch-dev/conch/ops"
)

// anyEvent draws an audited event with arbitrary text.
func anyEvent(t *rapid.T) ops.Event {
	text := rapid.String()
	owner := rapid.StringMatching(`s[0-9]{1,3}`).Draw(t, "owner")
	switch rapid.IntRange(0, 7).Draw(t, "kind") {
	case 0:
		return ops.Call{Owner: owner, Tool: "bash", Command: text.Draw(t, "command"), Workdir: text.Draw(t, "workdir"),
			TTY: rapid.Bool().Draw(t, "tty"), Background: rapid.Bool().Draw(t, "bg")}
	case 1:
		return ops.Decision{Owner: owner, Decision: "deny", Rule: text.Draw(t, "rule"), Command: text.Draw(t, "cmd")}
	case 2:
		return ops.Question{Owner: owner, Kind: "escalation", Subject: text.Draw(t, "subject")}
	case 3:
		return ops.Answer{Owner: owner, Kind: "rule", Choice: "deny", AnsweredBy: "client"}
	case 4:
		return ops.Grant{Owner: owner, Kind: "writable_root", Subject: text.Draw(t, "dir"), Scope: "session"}
	case 5:
		return ops.Denied{Owner: owner, Path: text.Draw(t, "path"), Op: "write", Reason: "protected"}
	case 6:
		return ops.Process{Owner: owner, ExitCode: rapid.IntRange(0, 255).Draw(t, "code"), OutputBytes: rapid.Int64Min(0).Draw(t, "bytes")}
	default:
		return ops.Kill{Owner: owner, Task: "bash-1", Reason: "shutdown"}
	}
}

// TestChainProperties: for any session, the chain verifies; a byte
// changed in any line but the last, a line removed (but the last), two
// neighbouring lines swapped: verify names that line's seq. Format of
// any line is one line with no control character.
func TestChainProperties(t *testing.T) {
	dir := t.TempDir()
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		path := filepath.Join(dir, fmt.Sprint(n), "audit.jsonl")
		events := rapid.SliceOfN(rapid.Custom(anyEvent), 3, 12).Draw(t, "events")
		l, err := audit.Open(path, &audit.Options{MaxBytes: rapid.Int64Range(200, 4000).Draw(t, "max")})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			l.Record(context.Background(), e)
		}
		l.Close()
		set, err := audit.Set(path)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, f := range set {
			b, _ := os.ReadFile(f)
			all = append(all, strings.SplitAfter(string(b), "\n")...)
			all = slices.DeleteFunc(all, func(s string) bool { return s == "" })
		}
		if len(all) != len(events) {
			t.Fatalf("%d lines for %d events", len(all), len(events))
		}
		for _, line := range all {
			if f := audit.Format([]byte(line)); strings.IndexFunc(f, func(r rune) bool { return unicode.IsControl(r) }) >= 0 {
				t.Fatalf("Format(%q) = %q has a control character", line, f)
			}
		}
		r, err := audit.Verify(path)
		if err != nil || !r.OK() {
			t.Fatalf("untouched: %v %+v", err, r)
		}

		// Put the set back into one file, then tamper with it.
		one := filepath.Join(filepath.Dir(path), "one.jsonl")
		k := rapid.IntRange(0, len(all)-2).Draw(t, "line")
		seq := k + 1
		tampered := slices.Clone(all)
		switch how := rapid.IntRange(0, 2).Draw(t, "how"); how {
		case 0:
			i := rapid.IntRange(0, len(all[k])-2).Draw(t, "byte") // not the newline
			b := []byte(all[k])
			b[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
			tampered[k] = string(b)
		case 1:
			tampered = slices.Delete(tampered, k, k+1)
		case 2:
			tampered[k], tampered[k+1] = tampered[k+1], tampered[k]
		}
		if err := os.WriteFile(one, []byte(strings.Join(tampered, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err = audit.Verify(one)
		if err != nil {
			t.Fatal(err)
		}
		named := false
		for _, p := range r.Problems {
			named = named || p.Seq == uint64(seq)
		}
		if !named {
			t.Fatalf("tampered with seq %d; verify found %v", seq, r.Problems)
		}
	})
}

// FuzzParseLine: the line parser and the readable form take any bytes
// without panicking; a line the parser accepts has a positive seq, and
// the readable form never carries a control character.
func FuzzParseLine(f *testing.F) {
	b, err := os.ReadFile("testdata/session.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f.Add([]byte(line))
	}
	f.Add([]byte(`{"time":"x","seq":1,"prev":"","owner":"\u202e","event":"call","command":"a\u0000b"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		seq, prev, err := audit.ParseLine(line)
		if err == nil && (seq == 0 || (prev != "" && len(prev) != 64)) {
			t.Fatalf("ParseLine(%q) = %d, %q", line, seq, prev)
		}
		out := audit.Format(line)
		if strings.IndexFunc(out, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
			t.Fatalf("Format(%q) = %q has a control or format character", line, out)
		}
	})
}

// benchLog is a log for a benchmark, and the event it records.
func benchLog(b *testing.B) (*audit.Log, ops.Event) {
	l, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	b.ReportAllocs()
	return l, ops.Call{Owner: "s1", CallID: ops.NewCallID(), Tool: "bash", Command: "echo hello", Workdir: "/srv/app"}
}

// BenchmarkRecord is what a caller pays for one event: the queue (keep
// -benchtime below QueueLen, or it measures the writer too).
func BenchmarkRecord(b *testing.B) {
	l, e := benchLog(b)
	for b.Loop() {
		l.Record(context.Background(), e)
	}
	b.StopTimer()
}

// BenchmarkRecordSync is one event written on its own, the caller waiting
// for it: redaction, the line, its hash, the lock and the write.
func BenchmarkRecordSync(b *testing.B) {
	l, e := benchLog(b)
	for b.Loop() {
		l.Record(context.Background(), e)
		l.Sync()
	}
}

// BenchmarkRecordBurst is the writer's cost per event when events come
// faster than one at a time: Record b.N events, then wait for the last.
func BenchmarkRecordBurst(b *testing.B) {
	l, e := benchLog(b)
	b.ResetTimer()
	for range b.N {
		l.Record(context.Background(), e)
	}
	l.Sync() // timed: the writer's work is what this measures
}

// BenchmarkRawAppend is the floor BenchmarkRecord stands on: the same
// line appended with one write(2), nothing else.
func BenchmarkRawAppend(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := []byte(`{"time":"2026-07-01T12:00:00.001000Z","seq":1,"prev":"52268a2ef54443f3b81621f92b7a4b45dbc60135bc2ce1c13fa2232d64d7d794","owner":"s1","event":"call","call_id":"c0ffee0000000001","tool":"bash","command":"echo hello","workdir":"/srv/app"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		f.Write(line)
	}
}
