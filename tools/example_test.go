//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// A Go program embeds conch without any transport: an executor runs the
// commands, a task runtime keeps the background ones, and the tools turn
// a model's raw JSON arguments into the text, error flag, structured
// value and completion notices the model gets back.
func Example() {
	ex, err := local.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()
	rt := tasks.New(nil)
	defer rt.Close() // runs first: stops the background tasks
	ts := tools.New(ex, &tools.Options{Tasks: rt, Home: os.TempDir()})

	ctx := context.Background()
	sess := tools.Session{ID: "session-1", Cwd: os.TempDir()}
	call := func(tool, args string) tools.Result {
		r := ts.Call(ctx, sess, tool, json.RawMessage(args), nil)
		if tool == "task_list" {
			// The text ("bash-1 [bash] completed, exit code: 0, 0.1s —
			// sleep 0.1; echo built") shows a run time; the value has
			// the same facts one by one.
			for _, e := range r.Value.(tools.TaskListValue).Tasks {
				fmt.Printf("%s -> %s %s %s (%s)\n", tool, e.ID, e.Status, e.Detail, e.Label)
			}
		} else {
			fmt.Printf("%s -> %q (error: %v)\n", tool, r.Text, r.IsError)
		}
		for _, n := range r.Notices {
			fmt.Println("notice about", n.TaskID)
		}
		return r
	}

	r := call("bash", `{"command": "echo hello; exit 3", "description": "Greet, then fail"}`)
	// The structured value rides alongside the text.
	value, _ := json.Marshal(r.Value)
	fmt.Printf("value: %s\n", value)
	call("bash", `{"command": "", "description": "Run nothing"}`)
	r = call("bash", `{"command": "sleep 0.1; echo built", "description": "Build in the background", "run_in_background": true}`)
	id := r.Value.(tools.BackgroundValue).TaskID

	// Wait until the task has ended (without collecting its output): the
	// session's next call carries the completion notice.
	ts.Tasks().Wait(ctx, sess.ID, id, time.Minute)
	call("task_list", `{}`)
	call("task_output", `{"task_id": "`+id+`"}`)

	// Output:
	// bash -> "hello\n[exit code: 3]" (error: false)
	// value: {"text":"hello\n[exit code: 3]","kind":"foreground","exitCode":3,"signal":null,"timedOut":false,"aborted":false,"timeoutMs":120000,"stdout":{"truncated":false,"bytes":6,"lines":1},"stderr":{"truncated":false,"bytes":0,"lines":0}}
	// bash -> "Error: invalid command: expected a non-empty string" (error: true)
	// bash -> "started background task bash-1" (error: false)
	// task_list -> bash-1 completed exit code: 0 (sleep 0.1; echo built)
	// notice about bash-1
	// task_output -> "built\n[status: completed, exit code: 0]" (error: false)
}
