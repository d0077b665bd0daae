package mcpserver_test

import (
	"regexp"
	"slices"
	"testing"
)

// TestTTYOverMCP: the official Go SDK client lists task_input and tty,
// and drives a REPL on a terminal: the tty call moves to a task at the
// prompt, task_input answers it, quit ends it, and more input is
// refused.
func TestTTYOverMCP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	cs := connect(t, e.serveHTTP(t), nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"bash", "task_output", "task_list", "task_kill", "task_input"}) {
		t.Errorf("tools %v", names)
	}
	text, isErr := call(t, cs, "bash", map[string]any{"command": `read -r -p 'name? ' n; echo "hi $n"`, "description": "Ask a name", "tty": true})
	m := regexp.MustCompile(`^name\? \n\[waiting for input; moved to background task (bash-\d+): send input with task_input, read it with task_output, stop it with task_kill\]$`).FindStringSubmatch(text)
	if isErr || m == nil {
		t.Fatalf("tty call: %q (isError %v)", text, isErr)
	}
	id := m[1]
	text, isErr = call(t, cs, "task_input", map[string]any{"task_id": id, "text": "Ada", "keys": []string{"Enter"}, "wait_ms": 10000})
	if want := "name? Ada\nhi Ada\n[status: completed, exit code: 0]"; isErr || text != want {
		t.Errorf("task_input = %q (isError %v), want %q", text, isErr, want)
	}
	text, isErr = call(t, cs, "task_input", map[string]any{"task_id": id, "text": "again"})
	if want := "Error: task " + id + " has already finished [status: completed, exit code: 0]"; !isErr || text != want {
		t.Errorf("input to a finished task = %q (isError %v), want %q", text, isErr, want)
	}
}
