package mcpserver

import (
	stdjson "encoding/json"

	// The JSON library the SDK decodes messages with, with the SDK's flag:
	// what it accepts is exactly what the SDK's transport would.
	"github.com/segmentio/encoding/json"
)

// maxDepth is the SDK's bound on a message's nesting.
const maxDepth = 1000

// wireMessage is the SDK's decoding of a JSON-RPC message's envelope
// (go-sdk internal/jsonrpc2 wireDecode), field for field.
type wireMessage struct {
	VersionTag string             `json:"jsonrpc"`
	ID         any                `json:"id,omitempty"`
	Method     stdjson.RawMessage `json:"method"`
	Params     stdjson.RawMessage `json:"params,omitempty"`
	Result     stdjson.RawMessage `json:"result,omitempty"`
	Error      *struct {
		Code    int64              `json:"code"`
		Message string             `json:"message"`
		Data    stdjson.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

// decodable reports whether the SDK's jsonrpc.DecodeMessage accepts v, a
// single valid JSON value, by the SDK's own rules but in one pass and
// without the 32 KiB buffer the SDK's decoder allocates for each value:
// the SDK then decodes the message once more, and this check ran on every
// message (TestDecodableMatchesSDK compares the two).
func decodable(v []byte) bool {
	if tooDeep(v) {
		return false
	}
	var m wireMessage
	if _, err := json.Parse(v, &m, json.DontMatchCaseInsensitiveStructFields); err != nil {
		return false
	}
	if m.VersionTag != "2.0" {
		return false
	}
	switch m.ID.(type) {
	case nil, float64, string:
	default:
		return false
	}
	if len(m.Method) > 0 {
		if tooDeep(m.Method) {
			return false
		}
		var method string
		_, err := json.Parse(m.Method, &method, json.DontMatchCaseInsensitiveStructFields)
		return err == nil
	}
	return m.ID != nil // a response needs its call's id
}

// tooDeep reports whether v nests past maxDepth, counting as the SDK does.
func tooDeep(v []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range v {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}
