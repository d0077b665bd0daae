package tools_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/tools"
)

// BenchmarkTaskInputRoundTrip types a line into an echoing REPL on a
// terminal with task_input and reads the answer, as a model would. A call
// cannot return before the output has been quiet for term.QuietPeriod, so
// the figure to read is "ms-over-quiet/p50": the median time beyond that
// period (target < 5 ms).
//
//	go test -run '^$' -bench TaskInputRoundTrip -benchtime 50x ./tools/
func BenchmarkTaskInputRoundTrip(b *testing.B) {
	e := newEnv(b, envOpts{})
	r := e.call(tools.NameBash, map[string]any{"command": replCommand, "description": "Start a REPL", "tty": true, "run_in_background": true})
	id := r.Value.(tools.BackgroundValue).TaskID
	e.readUntil(e.sess, id, "> ")
	var over []time.Duration
	for b.Loop() {
		start := time.Now()
		got := e.call(tools.NameTaskInput, map[string]any{"task_id": id, "text": "ping", "keys": []string{"Enter"}})
		over = append(over, time.Since(start)-term.QuietPeriod)
		if !strings.Contains(got.Text, "= PING\n> ") {
			b.Fatalf("answer %q", got.Text)
		}
	}
	slices.Sort(over)
	b.ReportMetric(float64(over[len(over)/2].Microseconds())/1000, "ms-over-quiet/p50")
	b.ReportMetric(float64(over[len(over)*99/100].Microseconds())/1000, "ms-over-quiet/p99")
	e.call(tools.NameTaskKill, map[string]any{"task_id": id})
}
