package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// maxMessageLine bounds one JSON-RPC message; the SDK's reader stops the
// whole connection on a longer line, so such a line is refused here.
const maxMessageLine = 8 << 20

// lockedWriter makes each Write whole on the wire: the SDK writes every
// message in one Write, and so does the input filter's error reply.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// errorReply is a JSON-RPC error response with a null id.
type errorReply struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *int             `json:"id"`
	Error   sdk.RequestError `json:"error"`
}

// filterInput copies the JSON-RPC messages of in, one per line, to out
// (the SDK's reader) and answers the lines that are not messages itself,
// as JSON-RPC requires and the SDK does not: a line that is not JSON gets
// a parse error (-32700), a line that is JSON but not a message object,
// or is too long, an invalid request error (-32600), each with a null id.
// It closes out when in ends, and stops when out is closed.
func filterInput(in io.Reader, out *io.PipeWriter, reply io.Writer, log *slog.Logger) {
	err := readLines(in, maxMessageLine, func(n int, line []byte, _ bool) bool {
		var code int
		var msg, reason string
		switch {
		case line == nil:
			code, msg, reason = -32600, "Invalid request", "message longer than 8 MiB"
		case len(bytes.TrimSpace(line)) == 0:
			return true
		case !json.Valid(line):
			code, msg, reason = -32700, "Parse error", "not JSON"
		default:
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) != nil {
				code, msg, reason = -32600, "Invalid request", "not a JSON object"
			} else if _, ok := m["method"]; !ok {
				if _, ok := m["id"]; !ok {
					code, msg, reason = -32600, "Invalid request", "neither a method nor an id"
				}
			}
		}
		if code == 0 {
			if _, err := out.Write(append(bytes.TrimSpace(line), '\n')); err != nil {
				log.Debug("acp: input dropped after the connection closed", "line", n)
				return false
			}
			return true
		}
		log.Warn("acp: refusing an input line", "line", n, "reason", reason)
		b, _ := json.Marshal(errorReply{
			JSONRPC: "2.0",
			Error:   sdk.RequestError{Code: code, Message: msg, Data: map[string]any{"reason": reason, "line": n}},
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
