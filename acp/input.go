package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strconv"

	sdk "github.com/coder/acp-go-sdk"
)

// maxMessageLine bounds one JSON-RPC message; the SDK's reader stops the
// whole connection on a longer line, so such a line is refused here.
const maxMessageLine = 8 << 20

// errorReply is a JSON-RPC error response.
type errorReply struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id"` // nil: null
	Error   sdk.RequestError `json:"error"`
}

// turnOrder is told, in input order, of the prompts and cancels read. The
// SDK runs each request on its own goroutine and notifications on
// another, so a session/cancel read right after a session/prompt can
// reach the agent before that prompt has started: only the reader knows
// which prompts a cancel was sent after. It also keeps the prompts that
// must wait for an earlier prompt of their session: the SDK cancels a
// session's prompt when the next one reaches it.
type turnOrder interface {
	// promptRead is called for each session/prompt that the SDK would
	// hand to Agent.Prompt, with its id (nil for a notification) and its
	// line. It reports whether the line is to be passed to the SDK now;
	// if not, the line is kept, and passed on later.
	promptRead(sessionID string, id *json.RawMessage, line []byte) (pass bool)
	// cancelRead is called for each session/cancel, which then does not
	// reach the SDK (unless it is a request, which the SDK answers).
	cancelRead(sessionID string)
}

// wireMessage is a message as the SDK decodes it: a line that does not
// decode so is dropped by the SDK without an answer, so it is answered
// here.
type wireMessage struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      *json.RawMessage  `json:"id,omitempty"`
	Method  string            `json:"method,omitempty"`
	Params  json.RawMessage   `json:"params,omitempty"`
	Result  json.RawMessage   `json:"result,omitempty"`
	Error   *sdk.RequestError `json:"error,omitempty"`
}

// validID reports whether raw is an id ACP allows: a string, an integer
// or null.
func validID(raw json.RawMessage) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return false
	}
	switch v := v.(type) {
	case nil, string:
		return true
	case json.Number:
		if _, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return true
		}
		f, err := v.Float64() // 1e3 is an integer too
		return err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<63
	}
	return false
}

// filterInput copies the JSON-RPC messages of in, one per line, to out
// (the SDK's reader) and answers the lines that are not messages itself,
// as JSON-RPC requires and the SDK does not: a line that is not JSON gets
// a parse error (-32700); a line that is JSON but not a message the SDK
// can decode (not an object, neither a method nor an id, an empty or
// non-string method, an id that is not a string, an integer or null), or
// is too long, an invalid request error (-32600), with the request's id
// when it has a valid one, else a null id. It tells order of the prompts
// and cancels it passes (see turnOrder). It closes out when in ends, and
// stops when out is closed.
func filterInput(in io.Reader, out *io.PipeWriter, reply io.Writer, log *slog.Logger, order turnOrder) {
	err := readLines(in, maxMessageLine, func(n int, line []byte, _ bool) bool {
		var refusal func(data any) *sdk.RequestError
		var reason string
		var id json.RawMessage
		var wm wireMessage
		switch {
		case line == nil:
			refusal, reason = sdk.NewInvalidRequest, "message longer than 8 MiB"
		case len(bytes.TrimSpace(line)) == 0:
			return true
		case !json.Valid(line):
			refusal, reason = sdk.NewParseError, "not JSON"
		default:
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) != nil {
				refusal, reason = sdk.NewInvalidRequest, "not a JSON object"
				break
			}
			_, hasMethod := m["method"]
			if raw, ok := m["id"]; ok && hasMethod && validID(raw) {
				id = raw
			}
			if err := json.Unmarshal(line, &wm); err != nil {
				refusal, reason = sdk.NewInvalidRequest, "not a JSON-RPC message: "+err.Error()
			} else if hasMethod && wm.Method == "" {
				refusal, reason = sdk.NewInvalidRequest, "empty method"
			} else if !hasMethod && wm.ID == nil {
				refusal, reason = sdk.NewInvalidRequest, "neither a method nor an id"
			} else if hasMethod && wm.ID != nil && !validID(*wm.ID) {
				refusal, reason = sdk.NewInvalidRequest, "the id is not a string, an integer or null"
			}
		}
		if refusal == nil {
			msg := append(bytes.TrimSpace(line), '\n')
			if order != nil && !tellOrder(order, wm, msg) {
				return true
			}
			if _, err := out.Write(msg); err != nil {
				log.Debug("acp: input dropped after the connection closed", "line", n)
				return false
			}
			return true
		}
		log.Warn("acp: refusing an input line", "line", n, "reason", reason)
		b, _ := json.Marshal(errorReply{
			JSONRPC: "2.0",
			ID:      id,
			Error:   *refusal(map[string]any{"reason": reason, "line": n}),
		})
		if _, err := reply.Write(append(b, '\n')); err != nil {
			log.Debug("acp: cannot answer a bad input line", "err", err)
			return false
		}
		return true
	})
	if err != nil {
		log.Warn("acp: reading input", "err", err)
	}
	out.Close()
}

// tellOrder tells order of m, whose line is line, if it is a prompt or a
// cancel that the SDK would hand to the agent (decoded and validated as
// the SDK does), and reports whether line is to be passed to the SDK now.
func tellOrder(order turnOrder, m wireMessage, line []byte) bool {
	switch m.Method {
	case sdk.AgentMethodSessionPrompt:
		var p sdk.PromptRequest
		if json.Unmarshal(m.Params, &p) == nil && p.Validate() == nil {
			return order.promptRead(string(p.SessionId), m.ID, line)
		}
	case sdk.AgentMethodSessionCancel:
		var p sdk.CancelNotification
		if json.Unmarshal(m.Params, &p) == nil && p.Validate() == nil {
			order.cancelRead(string(p.SessionId))
			return m.ID != nil
		}
	}
	return true
}
