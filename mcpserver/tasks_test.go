//go:build linux

package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/mcpserver"
	"github.com/conch-dev/conch/tools"
)

// wireClient speaks MCP 2026-07-28 over HTTP as JSON-RPC on the wire: each
// request stands alone and carries its _meta.
type wireClient struct {
	t     *testing.T
	url   string
	token string
	tasks bool // declare the tasks extension
	id    atomic.Int64
}

// rpc sends method with params and returns the result, or the error.
func (c *wireClient) rpc(method string, params map[string]any) (result map[string]any, rpcErr map[string]any) {
	c.t.Helper()
	caps := map[string]any{}
	if c.tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "0"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok && method == "tools/call" {
		req.Header.Set("Mcp-Name", name)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	data := []byte{}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
				data = []byte(d)
			}
		}
	} else {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		data = b.Bytes()
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		c.t.Fatalf("%s: status %s, body %q: %v", method, resp.Status, data, err)
	}
	return msg.Result, msg.Error
}

func (c *wireClient) ok(method string, params map[string]any) map[string]any {
	c.t.Helper()
	r, e := c.rpc(method, params)
	if e != nil {
		c.t.Fatalf("%s %v: error %v", method, params, e)
	}
	return r
}

// task starts command as a bash call and returns its task handle.
func (c *wireClient) task(args map[string]any) map[string]any {
	c.t.Helper()
	r := c.ok("tools/call", map[string]any{"name": "bash", "arguments": args})
	if r["resultType"] != "task" || r["status"] != "working" || r["taskId"] == "" {
		c.t.Fatalf("call %v: %v; want a working task", args, r)
	}
	return r
}

// poll gets task id until its status is not working. Each get reads the
// output that is new since the last: seen is all of it, the working
// messages' and the result's.
func (c *wireClient) poll(id string) (r map[string]any, seen string) {
	c.t.Helper()
	testutil.WaitFor(c.t, 20*time.Second, "task "+id+" to end", func() bool {
		r = c.ok("tasks/get", map[string]any{"taskId": id})
		if r["status"] == "working" {
			m, _ := r["statusMessage"].(string)
			seen += m
		}
		return r["status"] != "working"
	})
	return r, seen + resultText(r)
}

func resultText(r map[string]any) string {
	res, _ := r["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	first, _ := content[0].(map[string]any)
	s, _ := first["text"].(string)
	return s
}

// TestTasksExtension: at 2026-07-28 with io.modelcontextprotocol/tasks a
// bash call still running after the yield answers with a task; tasks/get
// follows it to its result; tasks/cancel kills it; tasks/update types
// into a tty task; the task tools see the same tasks; an id of an earlier
// run of the server is failed; without the extension the yield text
// stays.
func TestTasksExtension(t *testing.T) {
	t.Parallel()
	e := newEnvTools(t, &mcpserver.Options{Clients: []mcpserver.Client{{Name: "other", Token: "other-token"}}},
		tools.Options{YieldAfter: time.Second}) // bash starts and prints within it, even loaded
	hs := e.serveHTTP(t)
	c := &wireClient{t: t, url: hs.URL + "/mcp", token: testToken, tasks: true}

	disc := c.ok("server/discover", nil)
	caps, _ := disc["capabilities"].(map[string]any)
	if ext, _ := caps["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
		t.Errorf("server/discover does not declare the extension: %v", disc)
	}

	// A command that ends: working, then completed with its result.
	h := c.task(bash("echo first; sleep 2; echo done"))
	id := h["taskId"].(string)
	if !strings.Contains(h["statusMessage"].(string), "first") {
		t.Errorf("handle message %q: want the output so far", h["statusMessage"])
	}
	r, seen := c.poll(id)
	if r["status"] != "completed" || !strings.Contains(seen, "done") || r["resultType"] != "complete" ||
		!strings.Contains(resultText(r), "[status: completed, exit code: 0]") {
		t.Errorf("completed task: %v (output %q)", r, seen)
	}

	// Cancel: the process dies; the task says cancelled; the task
	// tools saw it.
	h = c.task(bash("sleep 63"))
	id = h["taskId"].(string)
	e.waitRunning(t, "sleep 63")
	list := c.ok("tools/call", map[string]any{"name": "task_list", "arguments": map[string]any{}})
	if !strings.Contains(resultText(map[string]any{"result": list}), "sleep 63") {
		t.Errorf("task_list misses the extension's task: %v", list)
	}
	if r := c.ok("tasks/cancel", map[string]any{"taskId": id}); r["status"] != "cancelled" {
		t.Errorf("tasks/cancel: %v", r)
	}
	e.waitGone(t, "sleep 63", 10*time.Second)
	if r, _ := c.poll(id); r["status"] != "cancelled" {
		t.Errorf("after cancel, tasks/get: %v", r)
	}

	// tty input through tasks/update.
	args := bash("read -r line; echo got:$line")
	args["tty"] = true
	h = c.task(args)
	id = h["taskId"].(string)
	c.ok("tasks/update", map[string]any{"taskId": id, "text": "hello\n"})
	if r, seen := c.poll(id); r["status"] != "completed" || !strings.Contains(seen, "got:hello") {
		t.Errorf("tty task after tasks/update: %v (output %q)", r, seen)
	}

	// An id of an earlier run of the server.
	inst, _, _ := strings.Cut(id, "-")
	prev := []byte(inst)
	prev[0] = map[bool]byte{true: '1', false: '0'}[prev[0] == '0']
	old := string(prev) + "-bash-1"
	if r := c.ok("tasks/get", map[string]any{"taskId": old}); r["status"] != "failed" ||
		r["statusMessage"] != "the server that ran this task restarted; its processes were stopped" {
		t.Errorf("an earlier run's task: %v", r)
	}
	if _, e := c.rpc("tasks/get", map[string]any{"taskId": "nonsense"}); e == nil {
		t.Error("an unknown id got no error")
	}
	// Another owner does not see the task.
	other := &wireClient{t: t, url: c.url, token: "other-token", tasks: true}
	if r, e := other.rpc("tasks/get", map[string]any{"taskId": id}); e == nil {
		t.Errorf("another owner got the task: %v", r)
	}
	if r, e := other.rpc("tasks/cancel", map[string]any{"taskId": id}); e == nil {
		t.Errorf("another owner cancelled the task: %v", r)
	}

	// Without the extension: the yield text, as before.
	plain := &wireClient{t: t, url: c.url, token: testToken}
	r = plain.ok("tools/call", map[string]any{"name": "bash", "arguments": bash("sleep 64")})
	if r["resultType"] == "task" || !strings.Contains(resultText(map[string]any{"result": r}), "moved to background task") {
		t.Errorf("without the extension: %v", r)
	}
	c.ok("tools/call", map[string]any{"name": "task_kill", "arguments": map[string]any{"task_id": "bash-4"}})
	e.waitGone(t, "sleep 64", 10*time.Second)
}
