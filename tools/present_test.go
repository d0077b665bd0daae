//go:build linux

package tools_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

func ptr[T any](v T) *T { return &v }

// TestPresentCall checks every call shape of docs/presentation.md#presentcall.
func TestPresentCall(t *testing.T) {
	cases := []struct {
		name string
		tool string
		args string
		want tools.View
		ok   bool
	}{
		{"foreground", "bash", `{"command":"ls -la src","description":"List the sources"}`,
			tools.View{Card: "terminal", Title: "ls -la src", Description: "List the sources"}, true},
		{"foreground_workdir", "bash", `{"command":"make","description":"Build","workdir":"sub/dir"}`,
			tools.View{Card: "terminal", Title: "make", Description: "Build", Cwd: "sub/dir"}, true},
		{"foreground_background_false", "bash", `{"command":"make","description":"Build","run_in_background":false,"workdir":"/abs"}`,
			tools.View{Card: "terminal", Title: "make", Description: "Build", Cwd: "/abs"}, true},
		{"foreground_no_description", "bash", `{"command":"make"}`,
			tools.View{Card: "terminal", Title: "make"}, true},
		{"background", "bash", `{"command":"npm run dev","description":"Start the dev server","run_in_background":true,"workdir":"web"}`,
			tools.View{Card: "generic", Title: "npm run dev", Kind: "execute", RawInput: "npm run dev", Content: []string{"Start the dev server"}}, true},
		{"task_output", "task_output", `{"task_id":"bash-3","wait":true}`,
			tools.View{Card: "generic", Title: "Read output from background task bash-3", Kind: "read", RawInput: "bash-3"}, true},
		{"task_list", "task_list", `{}`,
			tools.View{Card: "generic", Title: "List background tasks", Kind: "read"}, true},
		{"task_list_no_args", "task_list", ``,
			tools.View{Card: "generic", Title: "List background tasks", Kind: "read"}, true},
		{"task_kill", "task_kill", `{"task_id":"bash-3","reason":"done"}`,
			tools.View{Card: "generic", Title: "Kill background task bash-3", Kind: "execute", RawInput: "bash-3"}, true},
		// A remote host: named in the view, the workdir as given.
		{"foreground_host", "bash", `{"command":"make","host":"gpu1","workdir":"sub"}`,
			tools.View{Card: "terminal", Title: "make", Cwd: "sub", Host: "gpu1"}, true},
		{"foreground_host_local", "bash", `{"command":"make","host":"local"}`,
			tools.View{Card: "terminal", Title: "make"}, true},
		{"foreground_host_not_string", "bash", `{"command":"make","host":7}`,
			tools.View{Card: "terminal", Title: "make"}, true},
		// Malformed: no view.
		{"bash_no_command", "bash", `{"description":"x"}`, tools.View{}, false},
		{"bash_command_number", "bash", `{"command":42}`, tools.View{}, false},
		{"bash_not_json", "bash", `{"command":`, tools.View{}, false},
		{"bash_array", "bash", `["ls"]`, tools.View{}, false},
		{"task_output_no_id", "task_output", `{}`, tools.View{}, false},
		{"task_output_empty_id", "task_output", `{"task_id":""}`, tools.View{}, false},
		{"task_kill_number_id", "task_kill", `{"task_id":3}`, tools.View{}, false},
		{"unknown_tool", "read_file", `{"path":"x"}`, tools.View{}, false},
	}
	for _, c := range cases {
		got, ok := tools.PresentCall(c.tool, json.RawMessage(c.args))
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.name, ok, c.ok)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: PresentCall (-want +got):\n%s", c.name, diff)
		}
	}
	// The JSON an editor bridge reads.
	v, _ := tools.PresentCall("bash", json.RawMessage(`{"command":"make","description":"Build","workdir":"sub"}`))
	b, _ := json.Marshal(v)
	if string(b) != `{"card":"terminal","title":"make","description":"Build","cwd":"sub"}` {
		t.Errorf("JSON of a terminal call: %s", b)
	}
}

// TestPresentResult checks every result shape of docs/presentation.md#presentresult, including
// the three defects the seed commit fixed.
func TestPresentResult(t *testing.T) {
	fg := `{"command":"make","description":"Build"}`
	bg := `{"command":"make","description":"Build","run_in_background":true}`
	fence := func(s string) []string { return []string{"```console\n" + s + "\n```"} }
	yielded := "line 1\n[still running after 45000ms; moved to background task bash-2 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]"
	cases := []struct {
		name    string
		tool    string
		args    string
		texts   []string
		isError bool
		want    tools.View
		ok      bool
	}{
		{"exit_0", "bash", fg, []string{"hello\n"}, false,
			tools.View{Card: "terminal", Output: ptr("hello\n"), ExitCode: ptr(0)}, true},
		{"no_output", "bash", fg, []string{"(no output)"}, false,
			tools.View{Card: "terminal", Output: ptr("(no output)"), ExitCode: ptr(0)}, true},
		{"exit_3", "bash", fg, []string{"failing\n[exit code: 3]"}, false,
			tools.View{Card: "terminal", Output: ptr("failing"), ExitCode: ptr(3)}, true},
		{"stderr_and_exit", "bash", fg, []string{"out\n[stderr]\nerr\n[exit code: 2]"}, false,
			tools.View{Card: "terminal", Output: ptr("out\n[stderr]\nerr"), ExitCode: ptr(2)}, true},
		{"signal_after_timeout", "bash", fg, []string{"(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"}, false,
			tools.View{Card: "terminal", Output: ptr("(no output)\n[timed out after 100ms]"), Signal: "SIGTERM"}, true},
		{"trapped_timeout_exit_0", "bash", fg, []string{"(no output)\n[timed out after 1000ms]"}, false,
			tools.View{Card: "terminal", Output: ptr("(no output)\n[timed out after 1000ms]"), ExitCode: ptr(0)}, true},
		{"truncation_marker_stays", "bash", fg, []string{"tail\n\n[output truncated; full output: (unavailable)]\n[exit code: 1]"}, false,
			tools.View{Card: "terminal", Output: ptr("tail\n\n[output truncated; full output: (unavailable)]"), ExitCode: ptr(1)}, true},
		// An escalated result's line follows the second run's exit marker
		// (docs/sandbox.md): the pill is that run's exit, the text keeps
		// the line.
		{"escalated_exit_3", "bash", fg, []string{"out\n[exit code: 3]\n" + tools.EscalatedLine}, false,
			tools.View{Card: "terminal", Output: ptr("out\n" + tools.EscalatedLine), ExitCode: ptr(3)}, true},
		{"escalated_exit_0", "bash", fg, []string{"(no output)\n" + tools.EscalatedLine}, false,
			tools.View{Card: "terminal", Output: ptr("(no output)\n" + tools.EscalatedLine), ExitCode: ptr(0)}, true},
		{"escalated_yielded", "bash", fg, []string{yielded + "\n" + tools.EscalatedLine}, false,
			tools.View{Card: "generic", Content: fence(yielded + "\n" + tools.EscalatedLine)}, true},
		// Seed defect 1: an exit-0 output that merely ends in marker text.
		{"seed1_marker_text_without_newline", "bash", fg, []string{"building...[exit code: 5]"}, false,
			tools.View{Card: "terminal", Output: ptr("building...[exit code: 5]"), ExitCode: ptr(0)}, true},
		{"seed1_signal_text_without_newline", "bash", fg, []string{"x[killed by signal: SIGKILL]"}, false,
			tools.View{Card: "terminal", Output: ptr("x[killed by signal: SIGKILL]"), ExitCode: ptr(0)}, true},
		// The documented residual: a clean exit whose last line is exactly
		// a marker reads as that marker on replay.
		{"residual_last_line_is_a_marker", "bash", fg, []string{"log\n[exit code: 5]"}, false,
			tools.View{Card: "terminal", Output: ptr("log"), ExitCode: ptr(5)}, true},
		// Seed defect 2: a background call and its acknowledgement are a
		// generic card without an exit pill.
		{"seed2_background_ack", "bash", bg, []string{"started background task bash-1"}, false,
			tools.View{Card: "generic", Content: fence("started background task bash-1")}, true},
		{"background_error", "bash", bg, []string{"Error: background tasks unavailable: no task runtime is configured"}, true,
			tools.View{Card: "generic", Content: fence("Error: background tasks unavailable: no task runtime is configured")}, true},
		// An error result has no exit pill, even if its text looks like one.
		{"seed2_error", "bash", fg, []string{"Error: tool call aborted"}, true,
			tools.View{Card: "generic", Content: fence("Error: tool call aborted")}, true},
		{"error_with_marker_text", "bash", fg, []string{"Error: workdir /x\n[exit code: 1]\n\n"}, true,
			tools.View{Card: "generic", Content: fence("Error: workdir /x\n[exit code: 1]")}, true},
		// A yielded result: generic, no pill.
		{"yielded", "bash", fg, []string{yielded}, false,
			tools.View{Card: "generic", Content: fence(yielded)}, true},
		{"yielded_no_output", "bash", fg, []string{"(no output)\n[still running after 300ms; moved to background task bash-1 (its 800ms timeout still applies): read it with task_output, stop it with task_kill]"}, false,
			tools.View{Card: "generic", Content: fence("(no output)\n[still running after 300ms; moved to background task bash-1 (its 800ms timeout still applies): read it with task_output, stop it with task_kill]")}, true},
		// Task tools: generic.
		{"task_output", "task_output", `{"task_id":"bash-1"}`, []string{"one\n[status: completed, exit code: 0]"}, false,
			tools.View{Card: "generic", Content: fence("one\n[status: completed, exit code: 0]")}, true},
		{"task_kill_exit_marker", "task_kill", `{"task_id":"bash-1"}`, []string{"x\n[exit code: 3]"}, false,
			tools.View{Card: "generic", Content: fence("x\n[exit code: 3]")}, true},
		// Not exactly one text block, or a malformed call: no view.
		{"no_block", "bash", fg, nil, false, tools.View{}, false},
		{"two_blocks", "bash", fg, []string{"hello\n", "background task bash-1 (bash: x) finished [status: completed, exit code: 0]. Read its output with task_output."}, false, tools.View{}, false},
		{"malformed_call", "bash", `{"command":1}`, []string{"hello\n"}, false, tools.View{}, false},
		{"unknown_tool", "nope", `{}`, []string{"hello\n"}, false, tools.View{}, false},
	}
	for _, c := range cases {
		got, ok := tools.PresentResult(c.tool, json.RawMessage(c.args), c.texts, c.isError)
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.name, ok, c.ok)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: PresentResult (-want +got):\n%s", c.name, diff)
		}
		if got.Card == "generic" && (got.ExitCode != nil || got.Signal != "" || got.Output != nil) {
			t.Errorf("%s: a generic card with an exit pill: %+v", c.name, got)
		}
	}
	v, _ := tools.PresentResult("bash", json.RawMessage(fg), []string{"failing\n[exit code: 3]"}, false)
	b, _ := json.Marshal(v)
	if string(b) != `{"card":"terminal","output":"failing","exitCode":3}` {
		t.Errorf("JSON of a terminal result: %s", b)
	}
	v, _ = tools.PresentResult("bash", json.RawMessage(fg), []string{"hello\n"}, false)
	if b, _ = json.Marshal(v); string(b) != `{"card":"terminal","output":"hello\n","exitCode":0}` {
		t.Errorf("JSON of an exit-0 terminal result: %s (the 0 pill must be there)", b)
	}
}

// TestPresentRealResults presents what real calls returned, as a
// transport does live and on replay.
func TestPresentRealResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	cases := []struct {
		args     map[string]any
		card     string
		exitCode *int
		signal   string
	}{
		{map[string]any{"command": "echo hi", "description": "d"}, "terminal", ptr(0), ""},
		{map[string]any{"command": "printf 'x[exit code: 5]'", "description": "d"}, "terminal", ptr(0), ""},
		{map[string]any{"command": "echo x; exit 5", "description": "d"}, "terminal", ptr(5), ""},
		{map[string]any{"command": "sleep 60", "description": "d", "timeoutMs": 100}, "terminal", nil, "SIGTERM"},
		{map[string]any{"command": "sleep 60", "description": "d", "run_in_background": true}, "generic", nil, ""},
		{map[string]any{"command": "true", "description": "d", "workdir": "/nonexistent"}, "generic", nil, ""},
	}
	for _, c := range cases {
		raw := args(t, c.args)
		r := e.ts.Call(t.Context(), e.sess, tools.NameBash, raw, nil)
		call, ok := tools.PresentCall(tools.NameBash, raw)
		if !ok {
			t.Fatalf("%s: no call view", raw)
		}
		v, ok := tools.PresentResult(tools.NameBash, raw, []string{r.Text}, r.IsError)
		if !ok || v.Card != c.card || !cmp.Equal(v.ExitCode, c.exitCode) || v.Signal != c.signal {
			t.Errorf("%s: result %q presented as %+v", raw, r.Text, v)
		}
		if call.Terminal() != v.Terminal() && !r.IsError {
			t.Errorf("%s: call card %s, result card %s", raw, call.Card, v.Card)
		}
	}
}

// TestParseExitStatus checks the parser on its edges.
func TestParseExitStatus(t *testing.T) {
	for _, c := range []struct {
		text string
		want tools.ExitStatus
	}{
		{"", tools.ExitStatus{Output: ""}},
		{"[exit code: 5]", tools.ExitStatus{Output: "[exit code: 5]"}},
		{"\n[exit code: 5]", tools.ExitStatus{ExitCode: 5, Output: ""}},
		{"a\n[exit code: 5]\n", tools.ExitStatus{Output: "a\n[exit code: 5]\n"}},
		{"a\n[exit code: -1]", tools.ExitStatus{ExitCode: -1, Output: "a"}},
		{"a\n[exit code: 05]", tools.ExitStatus{Output: "a\n[exit code: 05]"}},
		{"a\n[exit code: +5]", tools.ExitStatus{Output: "a\n[exit code: +5]"}},
		{"a\n[exit code: five]", tools.ExitStatus{Output: "a\n[exit code: five]"}},
		{"a\n[exit code: 99999999999999999999]", tools.ExitStatus{Output: "a\n[exit code: 99999999999999999999]"}},
		{"a\n[killed by signal: SIGINT]", tools.ExitStatus{Signal: "SIGINT", Output: "a"}},
		{"a\n[killed by signal: ]", tools.ExitStatus{Output: "a\n[killed by signal: ]"}},
		{"a\n[killed by signal: A]B]", tools.ExitStatus{Output: "a\n[killed by signal: A]B]"}},
		{"a\n[killed by signal: SIGTERM]\n[exit code: 3]", tools.ExitStatus{ExitCode: 3, Output: "a\n[killed by signal: SIGTERM]"}},
		{"a\n[exit code: 3]\n[killed by signal: SIGTERM]", tools.ExitStatus{Signal: "SIGTERM", Output: "a\n[exit code: 3]"}},
		{"a\n[exit code: 3\n]", tools.ExitStatus{Output: "a\n[exit code: 3\n]"}},
		{"(no output)\n[timed out after 5ms]", tools.ExitStatus{Output: "(no output)\n[timed out after 5ms]"}},
	} {
		if got := tools.ParseExitStatus(c.text); got != c.want {
			t.Errorf("ParseExitStatus(%q) = %+v, want %+v", c.text, got, c.want)
		}
	}
}

var signals = []string{"SIGTERM", "SIGKILL", "SIGINT", "SIGHUP", "SIGSEGV", "SIGABRT", "SIGPIPE", "SIGQUIT", "SIGUSR1", "SIGBUS"}

// markerLine matches a last line that is exactly an exit or signal
// marker: the documented residual, which no renderer can tell apart from
// a real marker on replay.
var markerLine = regexp.MustCompile(`\n\[(exit code: -?\d+|killed by signal: [^\]\n]+)\]$`)

// TestParseExitStatusRoundTrip: for every foreground result, the exit
// status parsed back from its text is the result's own, and the output is
// the text without the exit or signal marker.
func TestParseExitStatusRoundTrip(t *testing.T) {
	// Text made of pieces that look like markers, so that the generator
	// often builds near misses.
	piece := rapid.SampledFrom([]string{
		"a", "ok", " ", "\n", "\n\n", "]", "[", "\t", "é", "\x00",
		"[exit code: 5]", "\n[exit code: 5]", "[exit code: 0]", "\n[exit code: ", "[killed by signal: SIGTERM]",
		"\n[killed by signal: SIGKILL]", "\n[killed by signal: ", "[timed out after 10ms]", "\n[stderr]\n",
		"(no output)", "[output truncated; full output: /x]", "[still running after 1ms; moved to background task bash-1: read it with task_output, stop it with task_kill]",
	})
	text := rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(piece, 0, 8).Draw(t, "pieces"), "")
	})
	output := rapid.Custom(func(t *rapid.T) shell.Output {
		o := shell.Output{Text: text.Draw(t, "text"), Truncated: rapid.Bool().Draw(t, "truncated")}
		if o.Truncated && rapid.Bool().Draw(t, "spilled") {
			o.SpillPath = "/tmp/conch-spill-1/abc-stdout"
		}
		return o
	})
	rapid.Check(t, func(t *rapid.T) {
		r := shell.Result{
			Stdout:   output.Draw(t, "stdout"),
			Stderr:   output.Draw(t, "stderr"),
			TimedOut: rapid.Bool().Draw(t, "timedOut"),
			Timeout:  time.Duration(rapid.IntRange(0, 600000).Draw(t, "timeoutMs")) * time.Millisecond,
		}
		wantCode, wantSig := 0, ""
		switch rapid.IntRange(0, 2).Draw(t, "end") {
		case 0:
			wantCode = rapid.IntRange(-1, 255).Draw(t, "exitCode")
			r.ExitCode = &wantCode
		case 1:
			wantSig = rapid.SampledFrom(signals).Draw(t, "signal")
			r.Signal = wantSig
		case 2: // neither: killed without a signal (reads as exit 0)
		}
		text := tools.RenderForeground(r, tools.DefaultMaxResultBytes)
		markers := r.TimedOut || wantSig != "" || wantCode != 0
		if !markers && markerLine.MatchString(text) {
			t.Skip("the documented residual: a clean exit whose last line is exactly a marker")
		}
		got := tools.ParseExitStatus(text)
		if got.ExitCode != wantCode || got.Signal != wantSig {
			t.Fatalf("ParseExitStatus(%q) = code %d signal %q, want code %d signal %q", text, got.ExitCode, got.Signal, wantCode, wantSig)
		}
		var marker string
		switch {
		case wantSig != "":
			marker = "\n[killed by signal: " + wantSig + "]"
		case wantCode != 0:
			marker = "\n[exit code: " + strconv.Itoa(wantCode) + "]"
		}
		if got.Output+marker != text {
			t.Fatalf("output %q + marker %q != text %q", got.Output, marker, text)
		}
		// And the editor sees the same.
		v, ok := tools.PresentResult("bash", json.RawMessage(`{"command":"x"}`), []string{text}, false)
		if !ok {
			t.Fatalf("no view of %q", text)
		}
		if v.Terminal() && (v.Signal != wantSig || (wantSig == "" && *v.ExitCode != wantCode)) {
			t.Fatalf("view %+v of %q", v, text)
		}
	})
}

// TestRenderForegroundRules checks the rendering rules of docs/tools.md#foreground-result on
// random results: the body comes first, verbatim; the markers follow in
// order, each on its own line; no markers means the body verbatim.
func TestRenderForegroundRules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := shell.Result{
			Stdout:   shell.Output{Text: rapid.StringMatching(`[a-z\n\[\]]{0,6}`).Draw(t, "stdout")},
			Stderr:   shell.Output{Text: rapid.StringMatching(`[a-z\n]{0,6}`).Draw(t, "stderr")},
			TimedOut: rapid.Bool().Draw(t, "timedOut"),
			Timeout:  time.Duration(rapid.IntRange(1, 1000).Draw(t, "ms")) * time.Millisecond,
		}
		if rapid.Bool().Draw(t, "signalled") {
			r.Signal = rapid.SampledFrom(signals).Draw(t, "signal")
		} else {
			r.ExitCode = ptr(rapid.IntRange(0, 3).Draw(t, "code"))
		}
		body := tools.JoinStreams(r.Stdout.Text, r.Stderr.Text)
		if body == "" {
			body = "(no output)"
		}
		var markers []string
		if r.TimedOut {
			markers = append(markers, "[timed out after "+strconv.FormatInt(r.Timeout.Milliseconds(), 10)+"ms]")
		}
		if r.Signal != "" {
			markers = append(markers, "[killed by signal: "+r.Signal+"]")
		} else if *r.ExitCode != 0 {
			markers = append(markers, "[exit code: "+strconv.Itoa(*r.ExitCode)+"]")
		}
		want := body
		if len(markers) > 0 {
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
			want += strings.Join(markers, "\n")
		}
		if got := tools.RenderForeground(r, tools.DefaultMaxResultBytes); got != want {
			t.Fatalf("RenderForeground = %q, want %q", got, want)
		}
	})
}

// FuzzPresentCall: PresentCall never panics, and a view it gives is well
// formed.
func FuzzPresentCall(f *testing.F) {
	for _, tool := range []string{"bash", "task_output", "task_list", "task_kill", "x"} {
		for _, a := range []string{``, `{}`, `null`, `[]`, `"s"`, `{"command":"ls","description":"d"}`,
			`{"command":"ls","run_in_background":true,"description":5}`, `{"command":"ls","workdir":{"a":1}}`,
			`{"task_id":"bash-1"}`, `{"task_id":[1]}`, `{"command":"\u0000\ud800"}`, `{"command":"a","command":1}`} {
			f.Add(tool, []byte(a))
		}
	}
	f.Fuzz(func(t *testing.T, tool string, a []byte) {
		v, ok := tools.PresentCall(tool, a)
		if !ok {
			if !cmp.Equal(v, tools.View{}) {
				t.Fatalf("no view, yet %+v", v)
			}
			return
		}
		switch v.Card {
		case "terminal":
			if tool != "bash" || v.Kind != "" || v.Content != nil {
				t.Fatalf("terminal view %+v of %s", v, tool)
			}
		case "generic":
			if v.Title == "" && tool != "bash" {
				t.Fatalf("generic view without a title: %+v", v)
			}
		default:
			t.Fatalf("card %q", v.Card)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPresentResult: PresentResult never panics, a terminal card always
// has exactly one of exitCode and signal, and a generic one has neither.
func FuzzPresentResult(f *testing.F) {
	for _, c := range []struct {
		tool, args, text string
		isError          bool
	}{
		{"bash", `{"command":"x"}`, "hello\n", false},
		{"bash", `{"command":"x"}`, "a\n[exit code: 3]", false},
		{"bash", `{"command":"x"}`, "a\n[killed by signal: SIGTERM]", false},
		{"bash", `{"command":"x"}`, "a[exit code: 3]", false},
		{"bash", `{"command":"x"}`, "Error: tool call aborted", true},
		{"bash", `{"command":"x","run_in_background":true}`, "started background task bash-1", false},
		{"bash", `{"command":"x"}`, "\n[still running after 1ms; moved to background task bash-1: read it with task_output, stop it with task_kill]", false},
		{"task_output", `{"task_id":"bash-1"}`, "x\n[status: running]", false},
		{"bash", `{"command":"x"}`, "\n[exit code: 99999999999999999999999]", false},
		{"bash", `{`, "", false},
	} {
		f.Add(c.tool, []byte(c.args), c.text, c.isError)
	}
	f.Fuzz(func(t *testing.T, tool string, a []byte, text string, isError bool) {
		v, ok := tools.PresentResult(tool, a, []string{text}, isError)
		if !ok {
			return
		}
		switch v.Card {
		case "terminal":
			if isError || (v.ExitCode == nil) == (v.Signal == "") || v.Output == nil {
				t.Fatalf("terminal view %+v of %q (isError %v)", v, text, isError)
			}
			if !strings.HasPrefix(text, *v.Output) {
				t.Fatalf("output %q is not a prefix of %q", *v.Output, text)
			}
		case "generic":
			if v.ExitCode != nil || v.Signal != "" || len(v.Content) != 1 {
				t.Fatalf("generic view %+v", v)
			}
		default:
			t.Fatalf("card %q", v.Card)
		}
		if _, ok := tools.PresentResult(tool, a, []string{text, text}, isError); ok {
			t.Fatal("a view of two text blocks")
		}
	})
}

// FuzzParseExitStatus: the output is always a prefix of the text, and a
// reported status comes from a marker that really ends it.
func FuzzParseExitStatus(f *testing.F) {
	for _, s := range []string{"", "\n[exit code: 1]", "x\n[killed by signal: SIGTERM]", "[exit code: 1]", "\n[exit code: -0]", "\n[killed by signal: \n]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		st := tools.ParseExitStatus(text)
		switch {
		case st.Signal != "":
			if text != st.Output+"\n[killed by signal: "+st.Signal+"]" || st.ExitCode != 0 {
				t.Fatalf("%q parsed as %+v", text, st)
			}
		case st.ExitCode != 0:
			if text != st.Output+"\n[exit code: "+strconv.Itoa(st.ExitCode)+"]" {
				t.Fatalf("%q parsed as %+v", text, st)
			}
		default:
			if st.Output != text && text != st.Output+"\n[exit code: 0]" {
				t.Fatalf("%q parsed as %+v", text, st)
			}
		}
	})
}
