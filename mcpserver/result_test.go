//go:build linux

package mcpserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/tools"
)

// rawResult is a tools/call response as the server wrote it: the
// structured value's bytes exactly as sent, and the text blocks.
type rawResult struct {
	structured json.RawMessage
	texts      []string
	isError    bool
}

func parseRaw(t *testing.T, line string) rawResult {
	t.Helper()
	var msg struct {
		Result struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &msg); err != nil {
		t.Fatalf("response %.200s: %v", line, err)
	}
	r := rawResult{structured: msg.Result.StructuredContent, isError: msg.Result.IsError}
	for _, c := range msg.Result.Content {
		if c.Type != "text" {
			t.Fatalf("a %s block in %.200s", c.Type, line)
		}
		r.texts = append(r.texts, c.Text)
	}
	return r
}

// text is the structured value's first member, "text"; it fails t when
// the value does not start with it.
func (r rawResult) text(t *testing.T) string {
	t.Helper()
	if !strings.HasPrefix(string(r.structured), `{"text":"`) {
		t.Fatalf("structuredContent does not start with its text: %.100s", r.structured)
	}
	var v struct{ Text string }
	if err := json.Unmarshal(r.structured, &v); err != nil {
		t.Fatal(err)
	}
	return v.Text
}

// blocks is what the text blocks say together: each notice block after a
// blank line.
func (r rawResult) blocks() string {
	s := ""
	for i, b := range r.texts {
		switch {
		case i == 0:
		case strings.HasSuffix(s, "\n"):
			s += "\n"
		default:
			s += "\n\n"
		}
		s += b
	}
	return s
}

// TestResultAsSent: over stdio, every successful result's structured
// value, byte for byte as the server writes it, starts with "text", says
// what the text blocks say (a completion notice included), and fits the
// result budget, also when JSON escaping multiplies the output (quotes,
// control bytes, <, U+2028); an error is text alone.
func TestResultAsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := serveRawStdio(t, e)
	id := 1
	call := func(request string) rawResult {
		t.Helper()
		c.send(request)
		return parseRaw(t, c.recv())
	}
	for _, command := range []string{
		"echo hi",
		"echo failing; exit 3",
		"seq 1 200000",
		`head -c 200000 /dev/zero | tr '\0' '"'`,
		`head -c 200000 /dev/zero | tr '\0' '\001'`,
		`head -c 200000 /dev/zero | tr '\0' '<'`,
		`for i in $(seq 1 20000); do printf '\u2028'; done`,
	} {
		id++
		r := call(callBash(id, command))
		if text := r.text(t); r.isError || text != r.blocks() || len(r.texts) != 1 {
			t.Errorf("%s: value text %.80q, blocks %.80q (error %v)", command, text, r.blocks(), r.isError)
		}
		if n := len(r.structured); n > tools.DefaultMaxResultBytes {
			t.Errorf("%s: structuredContent of %d bytes as sent, over the budget of %d", command, n, tools.DefaultMaxResultBytes)
		}
		if strings.Count(string(r.structured), `"text"`) != 1 {
			t.Errorf("%s: the value repeats the output: %.300s", command, r.structured)
		}
	}

	// A background task's notice rides on the next result, in both forms.
	// The task ends only once its start call is back: one that ended
	// before (the server descheduled on a loaded machine) would have its
	// notice ride on that call's own result.
	id++
	const held = "until [ -e gate ]; do sleep 0.01; done; echo done"
	dir := t.TempDir()
	started := call(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + held + `","workdir":"` + dir + `","description":"x","run_in_background":true}}}`)
	task := strings.TrimPrefix(started.text(t), "started background task ")
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.Wait(t.Context(), "stdio", task, 0); err != nil {
		t.Fatal(err)
	}
	id++
	r := call(callBash(id, "echo next"))
	want := "next\n\nbackground task " + task + " (bash: " + held + ") finished [status: completed, exit code: 0] after "
	if text := r.text(t); len(r.texts) != 2 || text != r.blocks() || !strings.HasPrefix(text, want) {
		t.Errorf("result with a notice: value text %q, blocks %q", text, r.texts)
	}

	// An error has no structured value.
	id++
	r = call(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"bash","arguments":{"command":""}}}`)
	if !r.isError || r.structured != nil || r.blocks() != "Error: invalid command: expected a non-empty string" {
		t.Errorf("error result: %+v", r)
	}
}
