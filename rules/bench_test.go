package rules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchRules are 200 rules: prefix, exact and glob, in every list.
func benchRules(b *testing.B) *Rules {
	var deny, ask, allow []string
	for i := range 200 {
		switch i % 4 {
		case 0:
			deny = append(deny, fmt.Sprintf("Bash(tool%d --force:*)", i))
		case 1:
			ask = append(ask, fmt.Sprintf("Bash(tool%d publish:*)", i))
		case 2:
			allow = append(allow, fmt.Sprintf("Bash(tool%d status)", i))
		default:
			allow = append(allow, fmt.Sprintf("Bash(tool%d * --dry-run)", i))
		}
	}
	r, err := Parse(deny, ask, allow, "ask")
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchLine is a command line of about 2 KB mixing lists, pipelines,
// substitutions, wrappers and a bash -c script.
func benchLine() string {
	parts := []string{
		`cd "$(git rev-parse --show-toplevel)" && git status --short | grep -v '^??' | wc -l`,
		`for f in $(find . -name '*.go' -newer go.mod); do gofmt -l "$f"; done`,
		`env GOFLAGS=-mod=mod timeout 60 nohup go test -race ./... 2>&1 | tail -n 50`,
		`bash -c 'make build && ./bin/tool --version' || echo "build failed: $?"`,
		`cat <<EOF > out.txt` + "\n" + `built at $(date -u +%FT%TZ) by $(whoami)` + "\nEOF",
		`ls -la | xargs -n1 stat -c '%n %s' | sort -k2 -n | head -20`,
	}
	var b strings.Builder
	for b.Len() < 2048 {
		for _, p := range parts {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p)
		}
	}
	return b.String()[:strings.LastIndex(b.String()[:2100], "\n")]
}

// BenchmarkCheck checks a 2 KB line against 200 rules and reports the
// 99th percentile of single checks (the promise: under 1 ms).
func BenchmarkCheck(b *testing.B) {
	r, line := benchRules(b), benchLine()
	if d := r.Check(line); d.Reason == ReasonUnparsable {
		b.Fatalf("the benchmark line does not parse: %+v", d)
	}
	b.SetBytes(int64(len(line)))
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r.Check(line)
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(r.Check(line).Commands)), "commands")
}
