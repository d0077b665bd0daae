package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/mcpserver/taskext"
	"github.com/conch-dev/conch/tools"
)

// The tasks extension (docs/transports.md#the-tasks-extension): a bash
// call of a 2026-07-28 client that declared io.modelcontextprotocol/tasks
// and is still running after the yield window answers with a task
// handle instead of the yield text. The handle is the background task the
// yield made, so the task tools and the extension's methods see the same
// tasks. Its id is the task's id under the server's instance
// (<instance>-<task id>): an id from an earlier run of the server is
// answered failed, with msgRestarted.

// msgRestarted is the failure of a task of an earlier run of the server.
const msgRestarted = "the server that ran this task restarted; its processes were stopped"

// pollInterval is how often conch suggests a client polls a task.
const pollInterval = 2 * time.Second

// asTask turns the yield result res of a call req into a task handle,
// when the call's client declared the extension; else it returns res.
func (s *Server) asTask(req mcp.Request, res mcp.Result) mcp.Result {
	cr, ok := res.(*mcp.CallToolResult)
	if !ok {
		return res
	}
	y, ok := cr.StructuredContent.(tools.YieldedValue)
	call, isCall := req.(*mcp.CallToolRequest)
	if !ok || !isCall || !stateless(call) || !taskext.Declared(call.ClientCapabilities()) {
		return res
	}
	now := time.Now()
	return taskext.NewCreateTaskResult(taskext.Task{
		TaskID:         s.instance + "-" + y.TaskID,
		Status:         taskext.StatusWorking,
		StatusMessage:  y.Text,
		CreatedAt:      taskext.Timestamp(now.Add(-time.Duration(y.YieldedAfterMs) * time.Millisecond)),
		LastUpdatedAt:  taskext.Timestamp(now),
		PollIntervalMs: pollInterval.Milliseconds(),
	})
}

// taskBackend answers the extension's methods for the owners resolve
// gives.
type taskBackend struct {
	s       *Server
	resolve resolver
}

// errRestarted answers a task of an earlier run of the server.
var errRestarted = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgRestarted}

// unknownTask answers an id that names no task of this server's.
func unknownTask(id string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task " + id}
}

// local is the conch task id of extension task id, or restarted when the
// id is of an earlier run of the server.
func (b taskBackend) local(id string) (tid string, restarted bool, err error) {
	inst, tid, ok := strings.Cut(id, "-")
	switch {
	case !ok || len(inst) != len(b.s.instance) || tid == "":
		return "", false, unknownTask(id)
	case inst != b.s.instance:
		return "", true, nil
	}
	return tid, false, nil
}

func taskArgs(tid string, more map[string]any) json.RawMessage {
	a := map[string]any{"task_id": tid}
	for k, v := range more {
		a[k] = v
	}
	b, _ := json.Marshal(a)
	return b
}

func (b taskBackend) Get(ctx context.Context, ss *mcp.ServerSession, id string) (taskext.Task, error) {
	x, err := b.resolve(ctx, ss)
	if err != nil {
		return taskext.Task{}, err
	}
	now := time.Now()
	t := taskext.Task{TaskID: id, LastUpdatedAt: taskext.Timestamp(now), PollIntervalMs: pollInterval.Milliseconds()}
	tid, restarted, err := b.local(id)
	if err != nil {
		return t, err
	}
	if restarted {
		t.Status, t.StatusMessage, t.Error = taskext.StatusFailed, msgRestarted, errRestarted
		t.CreatedAt, t.PollIntervalMs = t.LastUpdatedAt, 0
		return t, nil
	}
	r := b.s.ts.Call(ctx, tools.Session{ID: x.id}, tools.NameTaskOutput, taskArgs(tid, nil), nil)
	v, ok := r.Value.(tools.TaskOutputValue)
	if r.IsError || !ok {
		x.requeue(r.Notices)
		return t, unknownTask(id)
	}
	t.CreatedAt = taskext.Timestamp(now.Add(-time.Duration(v.ElapsedMs) * time.Millisecond))
	if carried := x.takeOutput(tid); carried != "" {
		r = withCarried(r, v, carried)
	}
	switch {
	case v.Status == "running" || v.Status == "stopping":
		// The new output rides in the message; the notices wait for
		// a result.
		t.Status, t.StatusMessage = taskext.StatusWorking, r.Text
		x.requeue(r.Notices)
	case x.cancelledTask(tid):
		t.Status, t.StatusMessage = taskext.StatusCancelled, r.Text
		x.requeue(r.Notices)
	default:
		// Ended, whatever its exit: a tool result, as the call's
		// would have been.
		t.Status, t.Result, t.PollIntervalMs = taskext.StatusCompleted, callResult(r), 0
	}
	return t, nil
}

func (b taskBackend) Cancel(ctx context.Context, ss *mcp.ServerSession, id string) (taskext.Task, error) {
	x, err := b.resolve(ctx, ss)
	if err != nil {
		return taskext.Task{}, err
	}
	tid, restarted, err := b.local(id)
	if err != nil {
		return taskext.Task{}, err
	}
	if restarted {
		return taskext.Task{}, errRestarted
	}
	r := b.s.ts.Call(ctx, tools.Session{ID: x.id}, tools.NameTaskKill, taskArgs(tid, nil), nil)
	x.requeue(r.Notices)
	if r.IsError {
		return taskext.Task{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.Text}
	}
	x.cancelTask(tid)
	now := taskext.Timestamp(time.Now())
	return taskext.Task{TaskID: id, Status: taskext.StatusCancelled, StatusMessage: r.Text, CreatedAt: now, LastUpdatedAt: now}, nil
}

func (b taskBackend) Update(ctx context.Context, ss *mcp.ServerSession, p *taskext.UpdateParams) error {
	x, err := b.resolve(ctx, ss)
	if err != nil {
		return err
	}
	tid, restarted, err := b.local(p.TaskID)
	if err != nil {
		return err
	}
	if restarted {
		return errRestarted
	}
	if p.Text == nil && p.Keys == nil {
		return nil // conch's tasks ask nothing by input requests
	}
	more := map[string]any{}
	if p.Text != nil {
		more["text"] = *p.Text
	}
	if p.Keys != nil {
		more["keys"] = p.Keys
	}
	r := b.s.ts.Call(ctx, tools.Session{ID: x.id}, tools.NameTaskInput, taskArgs(tid, more), nil)
	x.requeue(r.Notices)
	if r.IsError {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: r.Text}
	}
	// task_input answers with what the task printed meanwhile; the
	// extension's answer is an empty ack, so that output waits for the
	// next tasks/get.
	if v, ok := r.Value.(tools.TaskOutputValue); ok && v.Output != "" {
		x.carryOutput(tid, v.Output)
	}
	return nil
}

// withCarried is the read r (whose value is v) with carried, the output
// an earlier tasks/update read, before its own.
func withCarried(r tools.Result, v tools.TaskOutputValue, carried string) tools.Result {
	if !strings.HasSuffix(carried, "\n") {
		carried += "\n"
	}
	text := carried + r.Text
	if v.Output == "" { // "(no new output)" was the read
		text = carried + strings.TrimPrefix(r.Text, noNewOutput+"\n")
	}
	v.Text = strings.Replace(v.Text, r.Text, text, 1)
	v.Output = carried + v.Output
	r.Text, r.Value = text, v
	return r
}

// noNewOutput is task_output's read of a task that printed nothing new.
const noNewOutput = "(no new output)"

// taskNotes are what the extension keeps about an owner's tasks: those
// tasks/cancel stopped, and output a tasks/update read.
type taskNotes struct {
	mu     sync.Mutex
	ids    map[string]bool
	output map[string]string
}

func (x *session) carryOutput(tid, out string) {
	x.cancels.mu.Lock()
	defer x.cancels.mu.Unlock()
	if x.cancels.output == nil {
		x.cancels.output = map[string]string{}
	}
	x.cancels.output[tid] += out
}

func (x *session) takeOutput(tid string) string {
	x.cancels.mu.Lock()
	defer x.cancels.mu.Unlock()
	out := x.cancels.output[tid]
	delete(x.cancels.output, tid)
	return out
}

func (x *session) cancelTask(tid string) {
	x.cancels.mu.Lock()
	defer x.cancels.mu.Unlock()
	if x.cancels.ids == nil {
		x.cancels.ids = map[string]bool{}
	}
	x.cancels.ids[tid] = true
}

func (x *session) cancelledTask(tid string) bool {
	x.cancels.mu.Lock()
	defer x.cancels.mu.Unlock()
	return x.cancels.ids[tid]
}
