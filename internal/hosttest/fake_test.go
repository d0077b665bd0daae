//go:build linux

package hosttest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/hosttest"
)

// post sends body to url and returns the data of each server-sent event.
func post(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("%s: %s, %s", url, resp.Status, ct)
	}
	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		events = append(events, e)
	}
	return events
}

// types are the events' types.
func types(events []map[string]any) []string {
	var out []string
	for _, e := range events {
		out = append(out, e["type"].(string))
	}
	return out
}

// The fake Messages API, as Claude Code meets it: conch's tools not yet
// connected (WaitForMcpServers first), then the script's call as a
// tool_use, the result recorded once from the resent history, and a text
// answer at the end. Side requests without tools get text.
func TestAnthropicFake(t *testing.T) {
	api := hosttest.NewAnthropic(t, hosttest.Script(hosttest.Bash("echo hi")))
	url := api.URL() + "/v1/messages"
	waiting := `{"tools":[{"name":"WaitForMcpServers"}],"messages":[{"role":"user","content":"go"}]}`
	events := post(t, url, waiting)
	if got := events[4]["content_block"].(map[string]any); got["name"] != "WaitForMcpServers" {
		t.Errorf("first move %v, want WaitForMcpServers", got)
	}
	offered := `{"tools":[{"name":"mcp__conch__bash"}],"messages":[{"role":"user","content":"go"}]}`
	events = post(t, url, offered)
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(want, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	use := events[4]["content_block"].(map[string]any)
	input := events[5]["delta"].(map[string]any)["partial_json"]
	if use["name"] != "mcp__conch__bash" || input != `{"command":"echo hi","description":"Run a test command"}` {
		t.Errorf("tool_use %v with %v", use, input)
	}
	history := `{"tools":[{"name":"mcp__conch__bash"}],"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"` + use["id"].(string) + `","name":"mcp__conch__bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use["id"].(string) + `","content":[{"type":"text","text":"{\"text\":\"hi\\n\"}"}]}]}]}`
	for range 2 { // the history comes again with every request
		events = post(t, url, history)
	}
	if d := events[2]["delta"].(map[string]any); d["text"] != "done" {
		t.Errorf("after the script: %v", d)
	}
	if diff := cmp.Diff([]hosttest.Result{{Call: hosttest.Bash("echo hi"), Blocks: []string{`{"text":"hi\n"}`}}}, api.Results()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if d := post(t, url, `{"messages":[{"role":"user","content":"title?"}]}`)[2]["delta"].(map[string]any); d["text"] != "done" {
		t.Errorf("side request: %v", d)
	}
	if p := api.Problems(); p != nil {
		t.Errorf("problems %q", p)
	}
}

// The fake Responses API, as Codex meets it: conch's namespace offered, a
// function call in it, the function_call_output recorded, then a message.
func TestOpenAIFake(t *testing.T) {
	api := hosttest.NewOpenAI(t, hosttest.Script(hosttest.Bash("echo hi")))
	url := api.URL() + "/responses"
	tools := `"tools":[{"type":"namespace","name":"mcp__conch"}]`
	events := post(t, url, `{`+tools+`,"input":[{"type":"message","role":"user","content":[]}]}`)
	if diff := cmp.Diff([]string{"response.created", "response.output_item.added", "response.function_call_arguments.delta",
		"response.output_item.done", "response.completed"}, types(events)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	item := events[3]["item"].(map[string]any)
	if item["namespace"] != "mcp__conch" || item["name"] != "bash" || item["arguments"] != `{"command":"echo hi","description":"Run a test command"}` {
		t.Errorf("function call %v", item)
	}
	events = post(t, url, `{`+tools+`,"input":[{"type":"function_call_output","call_id":"`+item["call_id"].(string)+`","output":"Wall time: 0.1 seconds\nOutput:\n{}"}]}`)
	if got := events[2]["item"].(map[string]any); got["type"] != "message" {
		t.Errorf("after the script: %v", got)
	}
	if diff := cmp.Diff([]hosttest.Result{{Call: hosttest.Bash("echo hi"), Blocks: []string{"Wall time: 0.1 seconds\nOutput:\n{}"}}}, api.Results()); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if rest, ok := hosttest.CutWallTime(api.Results()[0].Blocks[0]); !ok || rest != "{}" {
		t.Errorf("CutWallTime: %q %v", rest, ok)
	}
}
