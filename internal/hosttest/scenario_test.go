//go:build linux

package hosttest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/hosttest"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

// budget is conch serve's default result budget (--max-result-bytes).
const budget = tools.DefaultMaxResultBytes

// yieldMs is the yield window the scenario's conch serve runs with: the
// issue's "60 s command" keeps its shape (a command still running after
// the window), in seconds instead of minutes.
const yieldMs = 1500

// got is one result as the fake model received it: the structured value
// as the host forwards it (Codex's "Wall time" prefix taken off), and its
// members.
type got struct {
	payload string         // the JSON text the model reads
	text    string         // its "text" member
	value   map[string]any // all of its members
}

// step is one call of the scenario and what its result must be.
type step struct {
	name string
	call hosttest.Call
	// again, when set, makes the model repeat the call while it returns
	// true for the result's text (at most 10 times): waiting for an event
	// that the model, too, would wait for (a notice).
	again func(text string) bool
	// want checks the result's text and returns the structured value the
	// host must have forwarded, byte for byte (facts that vary from run to
	// run taken from the result once checked).
	want func(t *testing.T, g got) any
}

// scenario is what the model does with conch in each host: CONTRACT 19's
// cases, one session, one call a turn. dir is the session's directory.
func scenario(dir, denied string) []step {
	sandbox := func(denied ...shell.SandboxDenial) *shell.SandboxReport {
		return &shell.SandboxReport{Mode: "workspace-write", Network: "public", Denied: append([]shell.SandboxDenial{}, denied...)}
	}
	fg := func(text string, code int, out, errS tools.StreamValue) tools.ForegroundValue {
		return tools.ForegroundValue{Text: text, Kind: "foreground", ExitCode: &code, TimeoutMs: 120000,
			Stdout: out, Stderr: errS, Sandbox: sandbox()}
	}
	whole := func(s string) tools.StreamValue {
		return tools.StreamValue{Bytes: int64(len(s)), Lines: int64(strings.Count(s, "\n"))}
	}
	answered := new(string) // what task_input showed of the tty task's answer
	// The background task waits for the next step's file: a task that
	// ended before its start call was back would have its notice ride on
	// that call's own result, the session's next one (docs/tasks.md#notices).
	const background = "until [ -e .bg-go ]; do sleep 0.01; done; echo bg-out"
	const notice = `background task bash-1 \(bash: until \[ -e \.bg-go \]; do sleep 0\.01; done; echo bg-out\) finished \[status: completed, exit code: 0\] after \d+\.\ds\. Last output:\nbg-out\nRead all of it with task_output\.`
	return []step{
		{name: "echo", call: hosttest.Bash("echo hi"), want: func(t *testing.T, g got) any {
			return fg("hi\n", 0, whole("hi\n"), whole(""))
		}},
		{name: "failing", call: hosttest.Bash("echo failing; exit 3"), want: func(t *testing.T, g got) any {
			return fg("failing\n[exit code: 3]", 3, whole("failing\n"), whole(""))
		}},
		{name: "200000_lines", call: hosttest.Bash("seq 1 200000"), want: func(t *testing.T, g got) any {
			var all strings.Builder
			for i := 1; i <= 200000; i++ {
				all.WriteString(strconv.Itoa(i) + "\n")
			}
			path := checkCut(t, g.text, all.String(), "")
			return fg(g.text, 0, tools.StreamValue{Truncated: true, SpillPath: path, Bytes: 1288895, Lines: 200000}, whole(""))
		}},
		{name: "200000_quotes", call: hosttest.Bash(`head -c 200000 /dev/zero | tr '\0' '"'`), want: func(t *testing.T, g got) any {
			path := checkCut(t, g.text, strings.Repeat(`"`, 200000), "")
			return fg(g.text, 0, tools.StreamValue{Truncated: true, SpillPath: path, Bytes: 200000}, whole(""))
		}},
		{name: "200000_control_bytes", call: hosttest.Bash(`head -c 200000 /dev/zero | tr '\0' '\001'`), want: func(t *testing.T, g got) any {
			// Binary output (docs/tools.md#binary-output): named, with the file that holds it.
			m := regexp.MustCompile(`^\[binary output: 200000 bytes; full output: (/[^\]]+)\]$`).FindStringSubmatch(g.text)
			if m == nil {
				t.Errorf("want the binary output's line:\n%s", g.text)
				return nil
			}
			// (The file went with the session when the host ended; the tools
			// tests read it.)
			return fg(g.text, 0, tools.StreamValue{SpillPath: m[1], Bytes: 200000}, whole(""))
		}},
		{name: "background", call: hosttest.Bash(background).With("run_in_background", true), want: func(t *testing.T, g got) any {
			return tools.BackgroundValue{Text: "started background task bash-1", Kind: "background", TaskID: "bash-1"}
		}},
		{name: "notice", call: hosttest.Bash("touch .bg-go; echo next"),
			again: func(text string) bool { return text == "next\n" }, // the task has not settled yet
			want: func(t *testing.T, g got) any {
				if !regexp.MustCompile(`^next\n\n` + notice + `$`).MatchString(g.text) {
					t.Errorf("want the output, a blank line and the notice:\n%s", g.text)
				}
				return fg(g.text, 0, whole("next\n"), whole(""))
			}},
		{name: "sandbox_denial", call: hosttest.Bash("touch " + denied), want: func(t *testing.T, g got) any {
			m := regexp.MustCompile(`^\[stderr\]\n(touch: cannot touch '` + regexp.QuoteMeta(denied) + `': [A-Za-z -]+\n)` +
				`\[sandbox: write to ` + regexp.QuoteMeta(denied) + ` denied under workspace-write mode; writable: ([^\n]+)\]\n\[exit code: 1\]` +
				// conch then asks the user (docs/sandbox.md#after-a-denial): Claude Code's -p
				// cancels the question, Codex declines it.
				`\n\[(the question was not answered|the user declined to run it outside the sandbox)\]$`).FindStringSubmatch(g.text)
			if m == nil || !strings.Contains(", "+m[2]+",", ", "+dir+",") {
				t.Errorf("want touch's error, the marker naming the writable roots (%s among them) the exit marker and the question's answer:\n%s", dir, g.text)
				return nil
			}
			v := fg(g.text, 1, whole(""), whole(m[1]))
			v.Sandbox = sandbox(shell.SandboxDenial{Path: denied, Op: "write"})
			return v
		}},
		{name: "yield", call: hosttest.Bash("echo start; sleep 4; echo end"), want: func(t *testing.T, g got) any {
			const want = "start\n[still running after 1500ms; moved to background task bash-2 (its 120000ms timeout still applies): read it with task_output, stop it with task_kill]"
			if g.text != want {
				t.Errorf("want %q", want)
			}
			return tools.YieldedValue{Text: want, Kind: "yielded", TaskID: "bash-2", YieldedAfterMs: yieldMs, TimeoutMs: 120000,
				Stdout: whole("start\n"), Stderr: whole("")}
		}},
		{name: "yield_read", call: hosttest.Call{Tool: "task_output", Args: map[string]any{"task_id": "bash-2", "wait": true}},
			want: func(t *testing.T, g got) any {
				code := 0
				return tools.TaskOutputValue{Text: "end\n[status: completed, exit code: 0]", TaskID: "bash-2",
					TaskState: tools.TaskState{Status: "completed", Detail: "exit code: 0", ExitCode: &code,
						ElapsedMs: elapsedFrom(t, g, 4000)}, Sandbox: sandbox()}
			}},
		// The yield window (1.5 s) comes before the idle period (2 s): the
		// call moves at the window, with the same marker.
		{name: "tty", call: hosttest.Bash(`printf 'name? '; read name; echo "hello $name"`).With("tty", true, "timeoutMs", 60000),
			want: func(t *testing.T, g got) any {
				const want = "name? \n[waiting for input; moved to background task bash-3: send input with task_input, read it with task_output, stop it with task_kill]"
				if g.text != want {
					t.Errorf("want %q", want)
				}
				after, _ := g.value["yieldedAfterMs"].(float64)
				if after < yieldMs {
					t.Errorf("yieldedAfterMs %v, before the yield window", after)
				}
				return tools.YieldedValue{Text: want, Kind: "yielded", TaskID: "bash-3", YieldedAfterMs: int64(after), TimeoutMs: 60000,
					Stdout: whole("name? "), Stderr: whole("")}
			}},
		// The answer may come in two reads on a loaded machine (task_input
		// returns once the output has been quiet for 300 ms): together
		// they show it once, and the task's end.
		{name: "task_input", call: hosttest.Call{Tool: "task_input", Args: map[string]any{"task_id": "bash-3", "text": "conch", "keys": []string{"Enter"}}},
			want: func(t *testing.T, g got) any {
				v := taskRead(t, g, "bash-3")
				*answered = strings.TrimSuffix(v.Text, readEnd(v.Status))
				return v
			}},
		{name: "tty_read", call: hosttest.Call{Tool: "task_output", Args: map[string]any{"task_id": "bash-3", "wait": true}},
			want: func(t *testing.T, g got) any {
				v := taskRead(t, g, "bash-3")
				rest := strings.TrimSuffix(v.Text, readEnd(v.Status))
				if rest == "(no new output)\n" {
					rest = ""
				}
				if *answered+rest != "name? conch\nhello conch\n" || v.Status != "completed" {
					t.Errorf("task_input showed %q, task_output %q: want the answer once, then the end", *answered, v.Text)
				}
				return v
			}},
	}
}

// taskRead is the value a read of task id must have, from its text: the
// status line is "[status: running]" or "[status: completed, exit code:
// 0]" (then the sandbox's report too), and the run time counts from the
// command's start (the call moved after the yield window).
func taskRead(t *testing.T, g got, id string) tools.TaskOutputValue {
	t.Helper()
	v := tools.TaskOutputValue{Text: g.text, TaskID: id, TaskState: tools.TaskState{Status: "running", ElapsedMs: elapsedFrom(t, g, yieldMs)}}
	if strings.HasSuffix(g.text, readEnd("completed")) {
		code := 0
		v.Status, v.Detail, v.ExitCode = "completed", "exit code: 0", &code
		// A settled tty task reports its sandbox, as a piped one does.
		v.Sandbox = &shell.SandboxReport{Mode: "workspace-write", Network: "public", Denied: []shell.SandboxDenial{}}
	} else if !strings.HasSuffix(g.text, readEnd("running")) {
		t.Errorf("want a read ending in its status line")
	}
	return v
}

// readEnd is the status line that ends a read of a task with status st
// (running, or completed with exit code 0).
func readEnd(st string) string {
	if st == "completed" {
		return "[status: completed, exit code: 0]"
	}
	return "[status: running]"
}

// elapsedFrom is the result's elapsedMs, which must count from the
// command's start: at least least.
func elapsedFrom(t *testing.T, g got, least int64) int64 {
	t.Helper()
	ms, _ := g.value["elapsedMs"].(float64)
	if int64(ms) < least {
		t.Errorf("elapsedMs %v, want the run time from the command's start, at least %d", ms, least)
	}
	return int64(ms)
}

// cutLine is the line that stands for the part of a stream a result
// leaves out.
var cutLine = regexp.MustCompile(`\[… (\d+) bytes \((\d+) lines\) omitted; full output: (/\S+-stdout)\]\n`)

// checkCut checks a text that shows stream, cut once: its start, the cut
// line, its end, then markers; the cut line counts exactly what lies
// between. It returns the spill file the cut line names.
func checkCut(t *testing.T, text, stream, markers string) string {
	t.Helper()
	m := cutLine.FindStringSubmatchIndex(text)
	if m == nil {
		t.Errorf("no cut line in %.300q…", text)
		return ""
	}
	head, tail := text[:m[0]], strings.TrimSuffix(text[m[1]:], markers)
	if !strings.HasPrefix(stream, head) {
		head = strings.TrimSuffix(head, "\n") // the line break before the cut line
	}
	n, _ := strconv.Atoi(text[m[2]:m[3]])
	lines, _ := strconv.Atoi(text[m[4]:m[5]])
	if !strings.HasPrefix(stream, head) || !strings.HasSuffix(stream, tail) || len(head) < 100 || len(tail) < 1000 ||
		n != len(stream)-len(head)-len(tail) || lines != strings.Count(stream, "\n")-strings.Count(head, "\n")-strings.Count(tail, "\n") {
		t.Errorf("head of %d bytes, tail of %d and %d bytes (%d lines) omitted do not make the stream of %d bytes", len(head), len(tail), n, lines, len(stream))
	}
	return text[m[6]:m[7]]
}

// next is the fake model's script: the steps' calls in order, a step
// repeated while its again says so.
func next(t *testing.T, steps []step, codex bool) hosttest.Next {
	return func(done []hosttest.Result) (hosttest.Call, bool) {
		i, repeats := 0, 0
		for _, r := range done {
			s := steps[i]
			if s.again != nil && repeats < 10 {
				if g, err := parse(r, codex); err == nil && s.again(g.text) {
					repeats++
					continue
				}
			}
			i, repeats = i+1, 0
			if i == len(steps) {
				return hosttest.Call{}, false
			}
		}
		return steps[i].call, true
	}
}

// parse reads a result as the model got it.
func parse(r hosttest.Result, codex bool) (got, error) {
	if len(r.Blocks) != 1 {
		return got{}, fmt.Errorf("%d blocks, want one (the structured value)", len(r.Blocks))
	}
	payload := r.Blocks[0]
	if codex {
		var ok bool
		if payload, ok = hosttest.CutWallTime(payload); !ok {
			return got{}, fmt.Errorf("no Wall time prefix: %.100q", r.Blocks[0])
		}
	}
	g := got{payload: payload}
	dec := json.NewDecoder(strings.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return g, fmt.Errorf("not a JSON object: %.100q", payload)
	}
	if tok, err := dec.Token(); err != nil || tok != "text" {
		return g, fmt.Errorf(`the first member is %v, not "text": %.100q`, tok, payload)
	}
	if err := json.Unmarshal([]byte(payload), &g.value); err != nil {
		return g, err
	}
	g.text, _ = g.value["text"].(string)
	return g, nil
}

// stringify is v as JSON.stringify (Claude Code) and serde_json (Codex)
// write it: no HTML escapes, U+2028 and U+2029 as they are.
func stringify(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	return strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(s)
}

// checkScenario checks every result the fake model received against
// steps: each is the structured value, "text" first, byte for byte what
// the step wants, within the budget.
func checkScenario(t *testing.T, host string, steps []step, results []hosttest.Result, codex bool) {
	t.Helper()
	i, repeats := 0, 0
	for _, r := range results {
		if i == len(steps) {
			t.Errorf("%s: a result after the scenario's end: %.200q", host, r.Text())
			break
		}
		s := steps[i]
		t.Run(s.name, func(t *testing.T) {
			if r.IsError {
				t.Errorf("a tool error: %q", r.Text())
			}
			g, err := parse(r, codex)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.payload) > budget {
				t.Errorf("%d bytes as %s forwards it, over the budget of %d", len(g.payload), host, budget)
			}
			if s.again != nil && repeats < 10 && s.again(g.text) {
				return // the model waits on
			}
			want := s.want(t, g)
			if want == nil {
				return
			}
			if w := stringify(want); g.payload != w {
				t.Errorf("%s forwarded (%d bytes):\n%s\nwant (%d bytes):\n%s", host, len(g.payload), g.payload, len(w), w)
			}
			if len(g.payload) < 1000 {
				t.Logf("%s forwarded %d bytes: %s", host, len(g.payload), g.payload)
			} else {
				t.Logf("%s forwarded %d bytes", host, len(g.payload))
			}
		})
		if s.again != nil && repeats < 10 {
			if g, err := parse(r, codex); err == nil && s.again(g.text) {
				repeats++
				continue
			}
		}
		i, repeats = i+1, 0
	}
	if i != len(steps) {
		t.Errorf("%s: the scenario stopped at step %d of %d (%s)", host, i, len(steps), steps[min(i, len(steps)-1)].name)
	}
}
