package hosttest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Anthropic is a scripted fake of Anthropic's Messages API, as Claude Code
// uses it: HEAD / (a reachability probe), POST /v1/messages/count_tokens,
// and POST /v1/messages answered as a server-sent event stream.
//
// A request that offers conch's tools (mcp__conch__*) gets the script's
// next call as a tool_use block; once the script is done, a text answer.
// Claude Code 2.1.197 connects --mcp-config servers in the background in
// -p mode (its first request may lack conch's tools and offer
// WaitForMcpServers instead), and 2.1.332 defers MCP tools behind
// ToolSearch: the fake calls those tools first, as a model would. Side
// requests that offer none of these tools get a plain text answer.
type Anthropic struct{ model }

// NewAnthropic starts a fake Messages API whose model follows next; it
// stops when the test ends.
func NewAnthropic(t testing.TB, next Next) *Anthropic {
	a := &Anthropic{model{t: t, next: next}}
	a.serve(http.HandlerFunc(a.handle))
	return a
}

// URL is the base URL to give Claude Code (ANTHROPIC_BASE_URL).
func (a *Anthropic) URL() string { return "http://" + a.addr }

// conchTools are the names Claude Code gives conch's tools.
var conchTools = []string{"mcp__conch__bash", "mcp__conch__task_output", "mcp__conch__task_list", "mcp__conch__task_kill", "mcp__conch__task_input"}

type anthropicRequest struct {
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (a *Anthropic) handle(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodHead:
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		io.WriteString(w, `{"input_tokens":100}`)
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
	default:
		a.mu.Lock()
		a.problem("unexpected request %s %s", r.Method, r.URL)
		a.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	var req anthropicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		a.mu.Lock()
		a.problem("messages request: %v", err)
		a.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	a.mu.Lock()
	helpers := map[string]int{} // the host's own tools called so far, by name
	for _, m := range req.Messages {
		var blocks []anthropicBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				helpers[b.Name]++
			case "tool_result":
				if _, ours := a.calls[b.ToolUseID]; !ours {
					continue // ToolSearch's and WaitForMcpServers' own
				}
				texts, err := resultTexts(b.Content)
				if err != nil {
					a.problem("tool_result %s: %v", b.ToolUseID, err)
				}
				a.record(b.ToolUseID, texts, b.IsError)
			}
		}
	}
	var (
		name, id string
		input    any
		text     = "done"
	)
	switch {
	case offered[conchTools[0]]:
		if c, cid, ok := a.decide("toolu_conch_"); ok {
			name, id, input = "mcp__conch__"+c.Tool, cid, c.Args
		}
	case offered["WaitForMcpServers"] && helpers["WaitForMcpServers"] == 0:
		name, id, input = "WaitForMcpServers", "toolu_wait", map[string]any{"servers": []string{"conch"}}
	case offered["ToolSearch"] && helpers["ToolSearch"] < 2:
		name, id, input = "ToolSearch", "toolu_search_"+string(rune('0'+helpers["ToolSearch"])),
			map[string]any{"query": "select:" + strings.Join(conchTools, ",")}
	case offered["ToolSearch"] || offered["WaitForMcpServers"]:
		text = "conch's tools never appeared"
		a.problem("conch's tools never appeared: offered %v", offered)
	}
	a.mu.Unlock()

	s := newSSE(w, true)
	s.event(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1},
	}})
	stop := "end_turn"
	if name == "" {
		s.textBlock(0, text)
	} else {
		s.textBlock(0, "Calling "+name+".")
		s.event(map[string]any{"type": "content_block_start", "index": 1,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}})
		s.event(map[string]any{"type": "content_block_delta", "index": 1,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": mustJSON(input)}})
		s.event(map[string]any{"type": "content_block_stop", "index": 1})
		stop = "tool_use"
	}
	s.event(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	s.event(map[string]any{"type": "message_stop"})
}

func (s *sseWriter) textBlock(index int, text string) {
	s.event(map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
	s.event(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": text}})
	s.event(map[string]any{"type": "content_block_stop", "index": index})
}

// resultTexts are the texts of a tool_result's content: one string, or
// text blocks. Any other block is reported.
func resultTexts(content json.RawMessage) ([]string, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []string{s}, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &blocks); err != nil {
		return nil, err
	}
	var out []string
	for _, b := range blocks {
		if b.Type != "text" {
			return out, &blockError{b.Type}
		}
		out = append(out, b.Text)
	}
	return out, nil
}

type blockError struct{ typ string }

func (e *blockError) Error() string { return "a " + e.typ + " block" }
