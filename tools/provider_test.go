//go:build linux

package tools_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// TestNeedsProviderFacts runs the result budget end to end through the
// real local executor. It needs the provider to fill the facts of a long
// stream (shell.Output.Head, Size, Lines, SpillErr; ReadResult's Skipped
// and SpillErr; Result.LeftRunning): until the provider change lands it
// fails, on purpose, rather than skipping.
func TestNeedsProviderFacts(t *testing.T) {
	t.Parallel()
	lines := func(prefix string, n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			b.WriteString(prefix + "-" + strconv.Itoa(i) + "\n")
		}
		return b.String()
	}
	seq := func(prefix string, n int) string {
		return "for i in $(seq 1 " + strconv.Itoa(n) + "); do echo " + prefix + "-$i; done"
	}

	t.Run("foreground_spill", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{local: local.Options{MaxOutputBytes: 100}})
		r := e.bash(seq("out", 300) + "; " + seq("err", 3) + " >&2")
		wantOK(t, r)
		v := r.Value.(tools.ForegroundValue)
		if !v.Stdout.Truncated || v.Stdout.SpillPath == "" || v.Stderr.Truncated {
			t.Fatalf("value %#v: want a cut stdout with a spill path", v)
		}
		full := lines("out", 300)
		checkSpill(t, v.Stdout.SpillPath, full)
		checkShown(t, v.Stdout.Text, full, v.Stdout.SpillPath)
		if !strings.HasPrefix(r.Text, "out-1\nout-2\n") || !strings.HasSuffix(r.Text, "out-300\n[stderr]\nerr-1\nerr-2\nerr-3\n") {
			t.Errorf("text = %q", r.Text)
		}
	})

	t.Run("foreground_over_the_spill_cap", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{local: local.Options{MaxOutputBytes: 100, MaxSpillBytes: 1024}})
		r := e.bash(seq("out", 300))
		wantOK(t, r)
		v := r.Value.(tools.ForegroundValue)
		checkShown(t, v.Stdout.Text, lines("out", 300), "(unavailable: over the 1 KiB spill cap)")
	})

	t.Run("lossy_read", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{local: local.Options{MaxOutputBytes: 100}})
		id := e.background(e.sess, seq("out", 300)+"; "+seq("err", 200)+" >&2")
		e.settle(e.sess, id)
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
		out := r.Value.(tools.TaskOutputValue).Output
		paths := spillPaths.FindAllString(out, -1)
		if len(paths) != 2 || !strings.HasSuffix(paths[0], "-stdout") || !strings.HasSuffix(paths[1], "-stderr") {
			t.Fatalf("lossy read %q: want each stream's own spill named", out)
		}
		checkSpill(t, paths[0], lines("out", 300))
		checkSpill(t, paths[1], lines("err", 200))
		so, se, _ := strings.Cut(out, "[stderr]\n")
		checkShown(t, so, lines("out", 300), paths[0])
		checkShown(t, se, lines("err", 200), paths[1])
	})

	t.Run("left_running", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{local: local.Options{Grace: 300 * time.Millisecond}})
		r := e.bash("sleep 600 & echo ok")
		const want = "ok\n[a process started by this command is still running and holding its output; its further output is discarded (use run_in_background to keep it)]"
		if r.Text != want {
			t.Errorf("text = %q, want %q", r.Text, want)
		}
	})

	// 100 MB of interleaved stdout and stderr: the text stays within the
	// default budget and the structured value carries no more than it.
	t.Run("hundred_megabytes", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		r := e.bash("(yes 'a line of standard output, long enough to be ordinary' | head -c 60000000) & " +
			"(yes 'an error line' | head -c 40000000 >&2); wait")
		wantOK(t, r)
		if len(r.Text) > tools.DefaultMaxResultBytes {
			t.Errorf("text: %d bytes, over the budget", len(r.Text))
		}
		v := r.Value.(tools.ForegroundValue)
		b, _ := json.Marshal(v)
		t.Logf("text %d bytes, structured value %d bytes of JSON", len(r.Text), len(b))
		if len(v.Stdout.Text)+len(v.Stderr.Text) > len(r.Text) || !strings.HasPrefix(r.Text, v.Stdout.Text) ||
			!strings.Contains(r.Text, "[stderr]\n"+v.Stderr.Text) {
			t.Errorf("the value's streams (%d + %d bytes) are not the text's", len(v.Stdout.Text), len(v.Stderr.Text))
		}
		if !strings.HasPrefix(r.Text, "a line of standard output") || !strings.Contains(r.Text, "[stderr]\nan error line\n") ||
			strings.Count(r.Text, " omitted; full output: ") != 2 {
			t.Errorf("text starts %q, ends %q", r.Text[:min(200, len(r.Text))], r.Text[max(0, len(r.Text)-200):])
		}
	})
}

// checkShown checks a stream shown with one cut against the whole stream:
// its head is the stream's start, its tail the stream's end, and its cut
// line counts exactly the bytes and lines between and names where.
func checkShown(t *testing.T, shown, full, where string) {
	t.Helper()
	m := cutLineRE.FindStringSubmatchIndex(shown)
	if m == nil {
		t.Fatalf("no cut line in %q", shown)
	}
	if !strings.HasSuffix(shown[:m[1]], "; full output: "+where+"]") {
		t.Errorf("cut line %q does not name %q", shown[m[0]:m[1]], where)
	}
	n, _ := strconv.Atoi(shown[m[2]:m[3]])
	l, _ := strconv.Atoi(shown[m[4]:m[5]])
	before, tail := shown[:m[0]], strings.TrimPrefix(shown[m[1]:], "\n")
	if !strings.HasSuffix(full, tail) {
		t.Fatalf("tail %q is not the stream's", tail)
	}
	// A head that does not end a line is followed by a newline of the cut.
	for _, head := range []string{before, strings.TrimSuffix(before, "\n")} {
		if strings.HasPrefix(full, head) && n == len(full)-len(head)-len(tail) &&
			l == strings.Count(full, "\n")-strings.Count(head, "\n")-strings.Count(tail, "\n") {
			return
		}
	}
	t.Errorf("head %q and tail %q do not account for the %d bytes (%d lines) the cut line says", before, tail, n, l)
}
