package acp

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"
)

func TestParsePrompt(t *testing.T) {
	bash := func(cmd string) (string, string) {
		return `{"command":"` + cmd + `"}`, `{"command":"` + cmd + `","description":"` + promptDescription + `"}`
	}
	for _, c := range []struct {
		in, tool, draw, exec, reply string
	}{
		{in: "", reply: HelpText},
		{in: "  \n\t", reply: HelpText},
		{in: "/help", reply: HelpText},
		{in: "echo hi", tool: "bash"},
		{in: "  ls -la \n", tool: "bash"},
		{"&sleep 1", "bash", `{"command":"sleep 1","run_in_background":true}`, `{"command":"sleep 1","description":"` + promptDescription + `","run_in_background":true}`, ""},
		{"& sleep 1", "bash", `{"command":"sleep 1","run_in_background":true}`, `{"command":"sleep 1","description":"` + promptDescription + `","run_in_background":true}`, ""},
		{"&", "bash", `{"command":"","run_in_background":true}`, `{"command":"","description":"` + promptDescription + `","run_in_background":true}`, ""},
		{"/tasks", "task_list", `{}`, `{}`, ""},
		{"/output bash-2", "task_output", `{"task_id":"bash-2"}`, `{"task_id":"bash-2"}`, ""},
		{"/kill bash-2", "task_kill", `{"task_id":"bash-2"}`, `{"task_id":"bash-2"}`, ""},
		{in: "/kill", reply: usageKill},
		{"/input bash-2  print( 1 )", "task_input", `{"task_id":"bash-2","text":"print( 1 )","keys":["Enter"]}`, `{"task_id":"bash-2","text":"print( 1 )","keys":["Enter"]}`, ""},
		{"/input bash-2", "task_input", `{"task_id":"bash-2","text":"","keys":["Enter"]}`, `{"task_id":"bash-2","text":"","keys":["Enter"]}`, ""},
		{in: "/input", reply: usageInput},
		{"/tty python3 -i", "bash", `{"command":"python3 -i","tty":true}`, `{"command":"python3 -i","description":"` + promptDescription + `","tty":true}`, ""},
		{in: "/tty ", reply: usageTTY},
		{in: "/output  ", reply: usageOutput},
		{in: "/tasksx", reply: "Unknown command `/tasksx`. " + HelpText},
		{in: "/x-y_2 a", reply: "Unknown command `/x-y_2`. " + HelpText},
		// A path is a command, not a slash command.
		{in: "/bin/echo hi", tool: "bash"},
		{in: "/tmp/", tool: "bash"},
		{in: "/", tool: "bash"},
		{in: "/taks;true", tool: "bash"},
	} {
		if c.tool == "bash" && c.draw == "" {
			c.draw, c.exec = bash(strings.TrimSpace(c.in))
		}
		got, reply := parsePrompt(c.in)
		if reply != c.reply || got.tool != c.tool || string(got.draw) != c.draw || string(got.exec) != c.exec {
			t.Errorf("parsePrompt(%q) = %s %s %s %q, want %s %s %s %q", c.in, got.tool, got.draw, got.exec, reply, c.tool, c.draw, c.exec, c.reply)
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
