package acp

import (
	"encoding/json"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

func TestParsePrompt(t *testing.T) {
	for _, c := range []struct {
		in, tool, draw, exec string
		ok                   bool
	}{
		{"", "", "", "", false},
		{"  \n\t", "", "", "", false},
		{"echo hi", "bash", `{"command":"echo hi"}`, `{"command":"echo hi","description":"` + promptDescription + `"}`, true},
		{"  ls -la \n", "bash", `{"command":"ls -la"}`, `{"command":"ls -la","description":"` + promptDescription + `"}`, true},
		{"&sleep 1", "bash", `{"command":"sleep 1","run_in_background":true}`, `{"command":"sleep 1","description":"` + promptDescription + `","run_in_background":true}`, true},
		{"& sleep 1", "bash", `{"command":"sleep 1","run_in_background":true}`, `{"command":"sleep 1","description":"` + promptDescription + `","run_in_background":true}`, true},
		{"&", "bash", `{"command":"","run_in_background":true}`, `{"command":"","description":"` + promptDescription + `","run_in_background":true}`, true},
		{"/tasks", "task_list", `{}`, `{}`, true},
		{"/output bash-2", "task_output", `{"task_id":"bash-2"}`, `{"task_id":"bash-2"}`, true},
		{"/kill bash-2", "task_kill", `{"task_id":"bash-2"}`, `{"task_id":"bash-2"}`, true},
		{"/kill", "task_kill", `{"task_id":""}`, `{"task_id":""}`, true},
		// A path is a command, not a slash command.
		{"/bin/echo hi", "bash", `{"command":"/bin/echo hi"}`, `{"command":"/bin/echo hi","description":"` + promptDescription + `"}`, true},
		{"/tasksx", "bash", `{"command":"/tasksx"}`, `{"command":"/tasksx","description":"` + promptDescription + `"}`, true},
	} {
		got, ok := parsePrompt(c.in)
		if ok != c.ok || got.tool != c.tool || string(got.draw) != c.draw || string(got.exec) != c.exec {
			t.Errorf("parsePrompt(%q) = %s %s %s %v, want %s %s %s %v", c.in, got.tool, got.draw, got.exec, ok, c.tool, c.draw, c.exec, c.ok)
		}
	}
}

func TestPromptText(t *testing.T) {
	var blocks []sdk.ContentBlock
	err := json.Unmarshal([]byte(`[
		{"type":"text","text":"wc -l "},
		{"type":"resource_link","name":"a b.txt","uri":"file:///work/a%20b.txt"},
		{"type":"text","text":" "},
		{"type":"resource_link","name":"main.go","uri":"file:///work/main.go"},
		{"type":"text","text":" "},
		{"type":"resource_link","name":"x","uri":"https://example.com/x"},
		{"type":"image","data":"AAAA","mimeType":"image/png"}
	]`), &blocks)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := promptText(blocks), `wc -l '/work/a b.txt' /work/main.go https://example.com/x`; got != want {
		t.Errorf("promptText = %q, want %q", got, want)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote = %s", got)
	}
}
