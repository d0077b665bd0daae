package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodableSeeds are lines on each side of the SDK's rules.
var decodableSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":"a","result":{}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"m","data":[1]}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":"x","message":"m"}}`,
	`{"jsonrpc":"2.0","id":7,"error":"no"}`,
	`{"jsonrpc":"2.0","id":7,"error":null}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":2.0,"id":1,"method":"ping"}`,
	`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","ID":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":1}`,
	`{"jsonrpc":"2.0","id":1,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"method":""}`,
	`{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`,
	`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","extra":{"deep":[[[]]]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":"` + strings.Repeat("[", 2000) + `"}`,
	`{"jsonrpc":"2.0","id":1,"method":"\ud800"}`,
	`{"jsonrpc":"2.0","id":"\ud800x","method":"ping"}`,
	`{}`,
	`{"jsonrpc":"2.0"}`,
}

// TestDecodableMatchesSDK: the line filter's check accepts a message
// exactly when the SDK's decoder does.
func TestDecodableMatchesSDK(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`
	for _, s := range append(decodableSeeds, deep) {
		checkDecodable(t, []byte(s))
	}
	// Both sides of the depth bound are seen.
	if decodable([]byte(deep)) {
		t.Error("a message nested 1002 deep was accepted")
	}
	if !decodable([]byte(decodableSeeds[0])) {
		t.Error("a tools/call was refused")
	}
}

func FuzzDecodable(f *testing.F) {
	for _, s := range decodableSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkDecodable(t, []byte(s))
	})
}

func checkDecodable(t *testing.T, v []byte) {
	t.Helper()
	if !json.Valid(v) {
		return // check refuses it before
	}
	_, err := jsonrpc.DecodeMessage(v)
	if got := decodable(v); got != (err == nil) {
		t.Errorf("decodable(%.200q) = %v; the SDK's DecodeMessage: %v", v, got, err)
	}
}
