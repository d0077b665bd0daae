package hosttest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// OpenAI is a scripted fake of OpenAI's Responses API, as Codex CLI uses
// it: POST /v1/responses answered as a server-sent event stream. Codex
// offers an MCP server's tools as one tool of type "namespace" named
// mcp__<server>; the fake calls them as function calls in that namespace.
type OpenAI struct{ model }

// NewOpenAI starts a fake Responses API whose model follows next; it stops
// when the test ends.
func NewOpenAI(t testing.TB, next Next) *OpenAI {
	o := &OpenAI{model{t: t, next: next}}
	o.serve(http.HandlerFunc(o.handle))
	return o
}

// URL is the base URL to give Codex (a model provider's base_url).
func (o *OpenAI) URL() string { return "http://" + o.addr + "/v1" }

type responsesRequest struct {
	Input []struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	} `json:"input"`
	Tools []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

func (o *OpenAI) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		o.mu.Lock()
		o.problem("unexpected request %s %s", r.Method, r.URL)
		o.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	var req responsesRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		o.mu.Lock()
		o.problem("responses request: %v", err)
		o.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	offered := false
	for _, t := range req.Tools {
		offered = offered || (t.Type == "namespace" && t.Name == "mcp__conch")
	}
	o.mu.Lock()
	for _, in := range req.Input {
		if in.Type != "function_call_output" {
			continue
		}
		texts, err := outputTexts(in.Output)
		if err != nil {
			o.problem("function_call_output %s: %v", in.CallID, err)
		}
		o.record(in.CallID, texts, false)
	}
	text := "done"
	var item map[string]any
	if !offered {
		text = "conch's tools are missing"
		o.problem("no mcp__conch namespace among the tools")
	} else if c, id, ok := o.decide("call_conch_"); ok {
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "namespace": "mcp__conch",
			"name": c.Tool, "arguments": mustJSON(c.Args), "status": "completed"}
	}
	if item == nil {
		item = map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	o.mu.Unlock()

	s := newSSE(w, false)
	resp := map[string]any{"id": "resp_fake", "object": "response", "status": "in_progress", "model": "fake", "output": []any{}}
	s.event(map[string]any{"type": "response.created", "response": resp})
	s.event(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if item["type"] == "function_call" {
		s.event(map[string]any{"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": item["id"], "delta": item["arguments"]})
	}
	s.event(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	resp["status"], resp["output"] = "completed", []any{item}
	resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
	s.event(map[string]any{"type": "response.completed", "response": resp})
}

// outputTexts are the texts of a function_call_output: one string (a
// tool's result), or input_text items (Codex's own refusals: its "Wall
// time" line, then the reason).
func outputTexts(output json.RawMessage) ([]string, error) {
	var s string
	if json.Unmarshal(output, &s) == nil {
		return []string{s}, nil
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(output, &items); err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		if it.Type != "input_text" {
			return out, &blockError{it.Type}
		}
		out = append(out, it.Text)
	}
	return out, nil
}
