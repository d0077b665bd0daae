// Package taskext is the server side of MCP's tasks extension,
// io.modelcontextprotocol/tasks (SEP-2663): a tools/call may answer with
// a task handle (resultType "task") instead of its result, and the client
// follows the task with tasks/get, answers it with tasks/update and stops
// it with tasks/cancel.
//
// It holds the extension's wire shapes and registers its methods on an
// SDK server; what a task is, and who may see it, is the Backend's. The
// Go SDK v1.8.0 has no tasks extension: this package stands in for it
// until it has one, behind the same three methods.
package taskext

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Extension is the extension's identifier in capabilities.
const Extension = "io.modelcontextprotocol/tasks"

// The extension's methods.
const (
	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"
)

// Task statuses.
const (
	StatusWorking       = "working"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// Declared reports whether client capabilities c declare the extension:
// only then may a call answer with a task.
func Declared(c *mcp.ClientCapabilities) bool {
	if c == nil || c.Extensions == nil {
		return false
	}
	_, ok := c.Extensions[Extension]
	return ok
}

// Advertise declares the extension in a server's capabilities.
func Advertise(c *mcp.ServerCapabilities) { c.AddExtension(Extension, map[string]any{}) }

// Task is a task's state (the extension's Task, with the fields of its
// status: result once completed, error once failed, inputRequests while
// input_required).
type Task struct {
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"` // null: unlimited
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	Result         any                 `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests,omitempty"`
}

// Timestamp is t as the extension writes times (ISO 8601, UTC).
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// CreateTaskResult answers a tools/call with a task handle.
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"` // "task"
	Task
}

// NewCreateTaskResult is the answer that hands the client task.
func NewCreateTaskResult(task Task) *CreateTaskResult {
	return &CreateTaskResult{ResultType: "task", Task: task}
}

// GetTaskResult answers tasks/get and tasks/cancel.
type GetTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"` // "complete"
	Task
}

// EmptyResult answers tasks/update.
type EmptyResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"` // "complete"
}

// TaskParams are the params of tasks/get and tasks/cancel.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// UpdateParams are the params of tasks/update: the responses to the
// task's input requests, and (conch's addition) text and keys for a
// task's terminal.
type UpdateParams struct {
	mcp.ParamsBase
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Keys           []string        `json:"keys,omitempty"`
}

// Backend answers the extension's methods for the requests of session ss
// (ctx is the request's).
type Backend interface {
	Get(ctx context.Context, ss *mcp.ServerSession, id string) (Task, error)
	Cancel(ctx context.Context, ss *mcp.ServerSession, id string) (Task, error)
	Update(ctx context.Context, ss *mcp.ServerSession, p *UpdateParams) error
}

// Register adds the extension's methods to s, answered by b.
func Register(s *mcp.Server, b Backend) error {
	err := mcp.AddReceivingCustomMethod(s, MethodGet, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*GetTaskResult, error) {
		t, err := b.Get(ctx, ss, p.TaskID)
		if err != nil {
			return nil, err
		}
		return &GetTaskResult{ResultType: "complete", Task: t}, nil
	})
	if err != nil {
		return err
	}
	err = mcp.AddReceivingCustomMethod(s, MethodCancel, func(ctx context.Context, ss *mcp.ServerSession, p *TaskParams) (*GetTaskResult, error) {
		t, err := b.Cancel(ctx, ss, p.TaskID)
		if err != nil {
			return nil, err
		}
		return &GetTaskResult{ResultType: "complete", Task: t}, nil
	})
	if err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(s, MethodUpdate, func(ctx context.Context, ss *mcp.ServerSession, p *UpdateParams) (*EmptyResult, error) {
		if err := b.Update(ctx, ss, p); err != nil {
			return nil, err
		}
		return &EmptyResult{ResultType: "complete"}, nil
	})
}
