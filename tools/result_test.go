//go:build linux

package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// valueText is the "text" member of r's value as it is sent, and the
// value's size as sent (json.Marshal, as the MCP SDK encodes it). It
// fails t when "text" is not the value's first member.
func valueText(t testing.TB, r tools.Result) (string, int) {
	t.Helper()
	b, err := json.Marshal(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"text":`) {
		t.Fatalf("value does not start with its text: %.80s", b)
	}
	var v struct{ Text string }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Text, len(b)
}

// wholeText is what the text blocks of r say: the text, then each notice
// after a blank line.
func wholeText(r tools.Result) string {
	s := r.Text
	for _, n := range r.Notices {
		if strings.HasSuffix(s, "\n") {
			s += "\n" + n.Text
		} else {
			s += "\n\n" + n.Text
		}
	}
	return s
}

// TestValueBudget: the output that JSON escaping multiplies (quotes take
// 2 bytes, control bytes and <, >, & 6, U+2028 6) still gives a value
// that, as sent, fits the budget, uses most of it, and says what the text
// blocks say; its streams are not repeated in it.
func TestValueBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	const budget = tools.DefaultMaxResultBytes
	for _, c := range []struct {
		name, command, last string
	}{
		{"lines", "seq 1 200000", "199999\n200000\n"},
		{"quotes", `head -c 200000 /dev/zero | tr '\0' '"'; echo; echo end`, "\"\nend\n"},
		// a control byte in every 11 (more than a tenth is binary output, named, not shown)
		{"control_bytes", `yes $'\001abcdefghi' | head -c 200000; echo; echo end`, "\nend\n"},
		{"html", `head -c 200000 /dev/zero | tr '\0' '<'; echo; echo end`, "<\nend\n"},
		{"line_separators", `for i in $(seq 1 20000); do printf '\u2028'; done; echo; echo end`, "\u2028\nend\n"},
		{"stderr_quotes", `seq 1 100000; head -c 200000 /dev/zero | tr '\0' '"' >&2; exit 3`, "\"\n[exit code: 3]"},
	} {
		r := e.bash(c.command)
		text, size := valueText(t, r)
		if r.IsError || text != r.Text || !strings.HasSuffix(text, c.last) || !strings.Contains(text, " omitted; full output: ") {
			t.Errorf("%s: value text %.200q…%q (error %v)", c.name, text, text[max(len(text)-40, 0):], r.IsError)
		}
		if size > budget || size < budget-2000 {
			t.Errorf("%s: value of %d bytes as sent, want at most %d and close to it", c.name, size, budget)
		}
		b, _ := json.Marshal(r.Value)
		if strings.Count(string(b), `"text"`) != 1 {
			t.Errorf("%s: the value repeats its streams' texts: %.300s", c.name, b)
		}
		t.Logf("%s: %d bytes of text, %d as sent", c.name, len(text), size)
	}
}

// TestReadBudget: a task_output read of output JSON escaping multiplies
// fits the budget as sent too.
func TestReadBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	for _, c := range []struct{ command, last string }{
		{"seq 1 200000", "200000\n"},
		{`head -c 200000 /dev/zero | tr '\0' '"'; echo; echo end`, "\"\nend\n"},
		{`yes $'\001abcdefghi' | head -c 200000; echo; echo end`, "\nend\n"},
		{`{ head -c 200000 /dev/zero | tr '\0' '<'; echo; echo end; } >&2`, "<\nend\n"},
	} {
		id := e.background(e.sess, c.command)
		e.settle(e.sess, id)
		r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
		text, size := valueText(t, r)
		if text != r.Text || !strings.HasSuffix(text, c.last+"[status: completed, exit code: 0]") || size > tools.DefaultMaxResultBytes {
			t.Errorf("%s: read of %d bytes as sent, text ends %q", c.command, size, text[max(len(text)-60, 0):])
		}
	}
}

// TestNoticesRideInTheValue: the completion notices that ride with a
// result are in its value's text, each after a blank line, in the order
// of the text blocks; those that do not fit (here, with a small budget)
// wait for the next result, none is lost or repeated, and every value
// stays within the budget.
func TestNoticesRideInTheValue(t *testing.T) {
	t.Parallel()
	const budget = 3000
	e := newEnv(t, envOpts{tools: tools.Options{MaxResultBytes: budget}})
	var ids []string
	for i := range 8 {
		// Last output full of quotes: 500 bytes that take 1,000 as sent.
		ids = append(ids, e.background(e.sess, `until [ -e gate ]; do sleep 0.01; done; head -c 490 /dev/zero | tr '\0' '"'; echo; echo task-`+strconv.Itoa(i)))
	}
	writeGate(t, e.dir)
	for _, id := range ids {
		e.settle(e.sess, id)
	}
	seen := map[string]int{}
	for call := 0; len(seen) < len(ids) && call < 10; call++ {
		r := e.bash("echo call " + strconv.Itoa(call))
		text, size := valueText(t, r)
		if text != wholeText(r) {
			t.Errorf("call %d: value text %q, text blocks say %q", call, text, wholeText(r))
		}
		if size > budget {
			t.Errorf("call %d: %d bytes as sent, over the budget of %d", call, size, budget)
		}
		if len(r.Notices) == 0 {
			t.Fatalf("call %d: no notice, %d of %d delivered", call, len(seen), len(ids))
		}
		for _, n := range r.Notices {
			seen[n.TaskID]++
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("notice of %s delivered %d times", id, seen[id])
		}
	}
}

// TestRequeuedNoticeGoesWithARead: a notice given back (its call was
// cancelled) rides on the next result, unless that result reads the task
// to its end.
func TestRequeuedNoticeGoesWithARead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	// Both end only once both start calls are back (a task that ended
	// before would have its notice ride on the other's start).
	gate := "until [ -e " + e.dir + "/gate ]; do sleep 0.01; done; "
	a, b := e.background(e.sess, gate+"echo a"), e.background(e.sess, gate+"echo b")
	writeGate(t, e.dir)
	e.settle(e.sess, a)
	e.settle(e.sess, b)
	ns := e.ts.Notices(e.sess.ID)
	if len(ns) != 2 {
		t.Fatalf("notices %q", ns)
	}
	e.ts.Requeue(e.sess.ID, ns)
	r := e.call(tools.NameTaskOutput, map[string]any{"task_id": a})
	if len(r.Notices) != 1 || r.Notices[0].TaskID != b {
		t.Fatalf("read of %s: notices %q, want only %s's", a, r.Notices, b)
	}
	if text, _ := valueText(t, r); text != "a\n[status: completed, exit code: 0]\n\n"+r.Notices[0].Text {
		t.Errorf("value text %q", text)
	}
	if r := e.bash("true"); r.Notices != nil {
		t.Errorf("notices again: %q", r.Notices)
	}
}

// TestNoticeSkipsAnError: a tool error is text alone, with no structured
// value to carry a notice in: the notice waits for the next result.
func TestNoticeSkipsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.background(e.sess, "until [ -e "+e.dir+"/gate ]; do sleep 0.01; done; echo done")
	writeGate(t, e.dir)
	e.settle(e.sess, id)
	if r := e.call(tools.NameBash, map[string]any{"command": "", "description": "Nothing"}); !r.IsError || r.Notices != nil {
		t.Fatalf("error result %q with notices %q", r.Text, r.Notices)
	}
	r := e.bash("true")
	if text, _ := valueText(t, r); len(r.Notices) != 1 || r.Notices[0].TaskID != id || !strings.HasPrefix(text, "(no output)\n\nbackground task "+id+" ") {
		t.Errorf("next result %q, notices %q", text, r.Notices)
	}
}

// writeGate lets the tasks that wait for dir/gate end.
func writeGate(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkDeliverEcho: what section 19 adds to an `echo hi` result (the
// value's text, the notices' split, the size of the value as sent)
// against rendering the text and value alone, as a result was before.
// Reports both medians and their difference (target: a few µs against a
// call of about 2 ms).
func BenchmarkDeliverEcho(b *testing.B) {
	ex, err := local.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ex.Close()
	ts := tools.New(ex, nil)
	code := 0
	res := shell.Result{ExitCode: &code, Timeout: 120 * time.Second, Stdout: shell.Output{Text: "hi\n", Size: 3, Lines: 1},
		Sandbox: &shell.SandboxReport{Mode: "workspace-write", Network: "on", Denied: []shell.SandboxDenial{}}}
	render := func(budget int) tools.Result {
		text, v := tools.RenderForegroundValue(res, budget)
		return tools.Result{Text: text, Value: v}
	}
	var rendered, delivered []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if i%2 == 0 {
			if r := render(tools.DefaultMaxResultBytes); r.Text != "hi\n" {
				b.Fatal(r.Text)
			}
			rendered = append(rendered, time.Since(t0))
		} else {
			if r := ts.Deliver("s", tools.Result{}, render, nil); r.Text != "hi\n" {
				b.Fatal(r.Text)
			}
			delivered = append(delivered, time.Since(t0))
		}
		i++
	}
	if len(rendered) == 0 || len(delivered) == 0 {
		return
	}
	mr, md := quantile(rendered, 0.5), quantile(delivered, 0.5)
	b.ReportMetric(mr, "render-median-ns")
	b.ReportMetric(md, "deliver-median-ns")
	b.ReportMetric(md-mr, "added-ns")
}
