package mcpserver

import (
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The JSON-RPC 2.0 spec's messages of its error codes (the codes are
// package jsonrpc's).
const (
	msgParseError     = "Parse error"
	msgInvalidRequest = "Invalid Request"
	msgMethodNotFound = "Method not found"
)

// errorReply is a JSON-RPC error response whose id is null: the answer to
// a message whose id cannot be known (it is not JSON, not a request, or
// never reached the SDK). data, if not empty, says what was wrong.
func errorReply(code int64, message, data string) []byte {
	e := jsonrpc.Error{Code: code, Message: message}
	if data != "" {
		e.Data, _ = json.Marshal(data)
	}
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *struct{}      `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, &e})
	return b
}

// errorLine is errorReply as one line.
func errorLine(code int64, message, data string) []byte {
	return append(errorReply(code, message, data), '\n')
}

// parseError answers a message that is not JSON.
var parseError = sync.OnceValue(func() []byte { return errorLine(jsonrpc.CodeParseError, msgParseError, "") })

// methodCancelled is the notification by which a client cancels one of
// its requests.
const methodCancelled = "notifications/cancelled"

// inflight follows the calls of one session from request to response, to
// tell which the client cancelled while they ran: the protocol says such
// a call gets no response (the official TypeScript client reports one as
// a response to an unknown message id), but the SDK always answers. It is
// safe for concurrent use.
type inflight struct {
	mu    sync.Mutex
	calls map[jsonrpc.ID]*call
}

// call is one call in flight.
type call struct {
	cancelled bool
	ended     chan struct{} // closed by done
}

// saw records a message from the client: a call starts being followed; a
// cancellation marks the call it names, if that call is in flight.
//
// A call that reuses the id of a cancelled call whose response has not
// gone out yet (its process group may be gone long before, on a loaded
// machine) waits until that response is dropped, or until stop is
// closed. The cancelled call ends soon; were the new call passed on
// before, the SDK would drop it without a word (its id is in use) or,
// taking it once the id is free, see the cancelled call's response taken
// for the new call's and sent. A call that reuses the id of a call still
// running leaves that call's entry alone (the SDK drops it). See
// docs/transports.md#cancellation.
func (f *inflight) saw(req *jsonrpc.Request, stop <-chan struct{}) {
	if req.IsCall() {
		for {
			f.mu.Lock()
			c := f.calls[req.ID]
			if c == nil {
				if f.calls == nil {
					f.calls = make(map[jsonrpc.ID]*call)
				}
				f.calls[req.ID] = &call{ended: make(chan struct{})}
			}
			f.mu.Unlock()
			if c == nil || !c.cancelled {
				return
			}
			select {
			case <-c.ended:
			case <-stop:
				return
			}
		}
	}
	if req.Method != methodCancelled {
		return
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.calls[id]; c != nil {
		c.cancelled = true
	}
}

// cancelled reports whether the client cancelled call id while it ran.
func (f *inflight) cancelled(id jsonrpc.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls[id]
	return c != nil && c.cancelled
}

// done stops following call id (its response is going out, or can no
// longer) and reports whether the client cancelled it: then the response
// must not go out. A later call that reuses the id is followed afresh.
func (f *inflight) done(id jsonrpc.ID) (cancelled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls[id]
	if c == nil {
		return false
	}
	delete(f.calls, id)
	close(c.ended)
	return c.cancelled
}
