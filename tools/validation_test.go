package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// TestValidation checks every message of docs/tools.md#validation in its order, and
// that a refused call spawns nothing and consumes no task number: each
// command would create a file, and the first real start after them all
// gets bash-1.
func TestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	noBg := newEnv(t, envOpts{tools: tools.Options{DisableBackground: true}})
	noRuntime := newEnv(t, envOpts{noTasks: true})
	neither := newEnv(t, envOpts{noTasks: true, tools: tools.Options{DisableBackground: true}})
	spawned := e.dir + "/spawned"
	touch := "touch " + spawned
	// q quotes a string as JSON.
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	cmd := `"command":` + q(touch)
	desc := `"description":"Touch a file"`

	const (
		msgCommand     = "invalid command: expected a non-empty string"
		msgDescription = "invalid description: expected a non-empty string"
		msgTimeout     = "invalid timeoutMs: expected a positive number, got "
		msgWorkdir     = "invalid workdir: expected a string"
		msgBackground  = "invalid run_in_background: expected a boolean"
		msgDisabled    = "run_in_background is disabled for this deployment (enableRunInBackground: false)"
		msgNoRuntime   = "background tasks unavailable: no task runtime is configured"
	)
	cases := []struct {
		name string
		env  *env
		args string
		msg  string
	}{
		{"command_missing", e, `{` + desc + `}`, msgCommand},
		{"command_number", e, `{"command":42,` + desc + `}`, msgCommand},
		{"command_null", e, `{"command":null,` + desc + `}`, msgCommand},
		{"command_empty", e, `{"command":"",` + desc + `}`, msgCommand},
		{"command_blank", e, `{"command":" \t\n ",` + desc + `}`, msgCommand},
		{"command_array", e, `{"command":["touch","x"],` + desc + `}`, msgCommand},
		{"args_not_object", e, `[` + q(touch) + `]`, msgCommand},
		{"args_null", e, `null`, msgCommand},
		{"args_empty", e, ``, msgCommand},
		{"args_not_json", e, `{"command":` + q(touch) + `,`, msgCommand},
		{"description_missing", e, `{` + cmd + `}`, msgDescription},
		{"description_blank", e, `{` + cmd + `,"description":"   "}`, msgDescription},
		{"description_number", e, `{` + cmd + `,"description":5}`, msgDescription},
		{"timeout_negative", e, `{` + cmd + `,` + desc + `,"timeoutMs":-1}`, msgTimeout + `-1`},
		{"timeout_zero", e, `{` + cmd + `,` + desc + `,"timeoutMs":0}`, msgTimeout + `0`},
		{"timeout_string", e, `{` + cmd + `,` + desc + `,"timeoutMs":"soon"}`, msgTimeout + `"soon"`},
		{"timeout_numeric_string", e, `{` + cmd + `,` + desc + `,"timeoutMs":"100"}`, msgTimeout + `"100"`},
		{"timeout_overflow", e, `{` + cmd + `,` + desc + `,"timeoutMs":1e999}`, msgTimeout + `1e999`},
		{"timeout_negative_overflow", e, `{` + cmd + `,` + desc + `,"timeoutMs":-1e999}`, msgTimeout + `-1e999`},
		{"timeout_NaN_string", e, `{` + cmd + `,` + desc + `,"timeoutMs":"NaN"}`, msgTimeout + `"NaN"`},
		{"timeout_bool", e, `{` + cmd + `,` + desc + `,"timeoutMs":true}`, msgTimeout + `true`},
		{"timeout_object", e, `{` + cmd + `,` + desc + `,"timeoutMs": { "ms" : 5 }}`, msgTimeout + `{"ms":5}`},
		{"workdir_number", e, `{` + cmd + `,` + desc + `,"workdir":5}`, msgWorkdir},
		{"workdir_object", e, `{` + cmd + `,` + desc + `,"workdir":{}}`, msgWorkdir},
		{"background_string", e, `{` + cmd + `,` + desc + `,"run_in_background":"yes"}`, msgBackground},
		{"background_number", e, `{` + cmd + `,` + desc + `,"run_in_background":1}`, msgBackground},
		{"background_disabled", noBg, `{` + cmd + `,` + desc + `,"run_in_background":true}`, msgDisabled},
		{"background_disabled_bad_type", noBg, `{` + cmd + `,` + desc + `,"run_in_background":"yes"}`, msgBackground},
		{"no_runtime", noRuntime, `{` + cmd + `,` + desc + `,"run_in_background":true}`, msgNoRuntime},
		// The order of the checks.
		{"order_command_first", e, `{"command":1,"description":1,"timeoutMs":-1,"workdir":1,"run_in_background":1}`, msgCommand},
		{"order_description_second", e, `{` + cmd + `,"description":1,"timeoutMs":-1,"workdir":1,"run_in_background":1}`, msgDescription},
		{"order_timeout_third", e, `{` + cmd + `,` + desc + `,"timeoutMs":-1,"workdir":1,"run_in_background":1}`, msgTimeout + `-1`},
		{"order_workdir_fourth", e, `{` + cmd + `,` + desc + `,"workdir":1,"run_in_background":1}`, msgWorkdir},
		{"order_disabled_before_runtime", neither, `{` + cmd + `,` + desc + `,"run_in_background":true}`, msgDisabled},
	}
	var all strings.Builder
	for _, c := range cases {
		r := c.env.ts.Call(t.Context(), c.env.sess, tools.NameBash, json.RawMessage(c.args), nil)
		if !r.IsError || r.Text != "Error: "+c.msg || r.Value != nil {
			t.Errorf("%s: %s\n got %q (isError %v)\nwant %q", c.name, c.args, r.Text, r.IsError, "Error: "+c.msg)
		}
		all.WriteString(c.name + ": " + r.Text + "\n")
	}
	golden(t, "messages.txt", all.String())

	// A cancelled ctx: refused last, after the arguments, before the spawn.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, bg := range []string{"false", "true"} {
		r := e.ts.Call(ctx, e.sess, tools.NameBash, json.RawMessage(`{`+cmd+`,`+desc+`,"run_in_background":`+bg+`}`), nil)
		wantError(t, r, "tool call aborted")
		r = e.ts.Call(ctx, e.sess, tools.NameBash, json.RawMessage(`{`+cmd+`,`+desc+`,"timeoutMs":-1}`), nil)
		wantError(t, r, msgTimeout+"-1")
		r = noRuntime.ts.Call(ctx, noRuntime.sess, tools.NameBash, json.RawMessage(`{`+cmd+`,`+desc+`,"run_in_background":true}`), nil)
		wantError(t, r, msgNoRuntime)
	}

	// Nothing ran...
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(spawned); err == nil {
		t.Fatal("a refused call spawned its command")
	}
	// ...and no number was consumed.
	if id := e.background(e.sess, "true"); id != "bash-1" {
		t.Errorf("first real start got %s, want bash-1", id)
	}

	// Accepted shapes: null means "not given"; a false run_in_background
	// with background disabled runs in the foreground; a tiny positive
	// timeout is a timeout.
	for _, c := range []struct {
		env  *env
		args string
		want string
	}{
		{e, `{"command":"echo ok","description":"d","timeoutMs":null,"workdir":null,"run_in_background":null}`, "ok\n"},
		{noBg, `{"command":"echo ok","description":"d","run_in_background":false}`, "ok\n"},
		{e, `{"command":"echo ok","description":"d","timeoutMs":1.5e4}`, "ok\n"},
	} {
		r := c.env.ts.Call(t.Context(), c.env.sess, tools.NameBash, json.RawMessage(c.args), nil)
		if r.IsError || r.Text != c.want {
			t.Errorf("%s: %q (isError %v), want %q", c.args, r.Text, r.IsError, c.want)
		}
	}
}

// TestParseBashArgs checks the parsed arguments of accepted calls.
func TestParseBashArgs(t *testing.T) {
	for _, c := range []struct {
		args string
		bg   bool
		want tools.BashArgs
	}{
		{`{"command":" ls ","description":"List"}`, true, tools.BashArgs{Command: " ls ", Description: "List"}},
		{`{"command":"ls","description":"List","timeoutMs":2500,"workdir":"src","run_in_background":true}`, true,
			tools.BashArgs{Command: "ls", Description: "List", Timeout: 2500 * time.Millisecond, Workdir: "src", Background: true}},
		{`{"command":"ls","description":"List","timeoutMs":0.5}`, true, tools.BashArgs{Command: "ls", Description: "List", Timeout: 500 * time.Microsecond}},
		{`{"command":"ls","description":"List","timeoutMs":1e300}`, true, tools.BashArgs{Command: "ls", Description: "List", Timeout: 1e12 * time.Millisecond}},
		{`{"command":"ls","description":"List","run_in_background":false}`, false, tools.BashArgs{Command: "ls", Description: "List"}},
	} {
		got, err := tools.ParseBashArgs(json.RawMessage(c.args), c.bg)
		if err != nil || got != c.want {
			t.Errorf("ParseBashArgs(%s) = %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	_, err := tools.ParseBashArgs(json.RawMessage(`{}`), true)
	if ae, ok := err.(*tools.ArgError); !ok || ae.Msg != "invalid command: expected a non-empty string" {
		t.Errorf("error %#v, want an *ArgError", err)
	}
}

// TestSchemas pins what a model is shown: tool names, titles,
// descriptions, input and output schemas, with background execution on
// and off, and the prompt sections.
func TestSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	noBg := newEnv(t, envOpts{tools: tools.Options{DisableBackground: true}})
	noRuntime := newEnv(t, envOpts{noTasks: true})
	yield := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 45 * time.Second, MaxResultBytes: 20000},
		local: local.Options{Timeout: 90 * time.Second, MaxTimeout: 300 * time.Second}})
	yieldNoBg := newEnv(t, envOpts{tools: tools.Options{YieldAfter: 45 * time.Second, DisableBackground: true}})

	for _, c := range []struct {
		name string
		env  *env
	}{{"tools", e}, {"tools_background_disabled", noBg}, {"tools_no_runtime", noRuntime},
		{"tools_yield", yield}, {"tools_yield_background_disabled", yieldNoBg}} {
		var b strings.Builder
		for _, tl := range c.env.ts.Tools() {
			for _, s := range []json.RawMessage{tl.InputSchema, tl.OutputSchema} {
				if !json.Valid(s) {
					t.Errorf("%s: invalid schema %s", tl.Name, s)
				}
			}
			b.WriteString("== " + tl.Name + " (" + tl.Title + ")")
			if tl.ReadOnly {
				b.WriteString(" readOnly")
			}
			if tl.Destructive {
				b.WriteString(" destructive")
			}
			b.WriteString("\n" + tl.Description + "\ninput: " + string(tl.InputSchema) + "\noutput: " + string(tl.OutputSchema) + "\n")
		}
		golden(t, c.name+".txt", b.String())
	}
	golden(t, "prompt.txt", e.ts.Prompt())
	golden(t, "prompt_no_runtime.txt", noRuntime.ts.Prompt())
	if !strings.HasPrefix(e.ts.Prompt(), "Check the [exit code: N] marker on every bash result; investigate failures before moving on.") {
		t.Errorf("prompt = %q", e.ts.Prompt())
	}

	// The parameters, in the contract's order.
	order := func(schema json.RawMessage) []string {
		dec := json.NewDecoder(strings.NewReader(string(schema)))
		var keys []string
		depth := 0
		inProps := false
		for {
			tok, err := dec.Token()
			if err != nil {
				return keys
			}
			switch v := tok.(type) {
			case json.Delim:
				if v == '{' || v == '[' {
					depth++
				} else {
					depth--
					if depth == 1 {
						inProps = false
					}
				}
			case string:
				if depth == 1 && v == "properties" {
					inProps = true
				} else if inProps && depth == 2 {
					keys = append(keys, v)
					// Skip the property's schema.
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return keys
					}
				}
			}
		}
	}
	bash := e.ts.Tools()[0]
	if got := strings.Join(order(bash.InputSchema), ","); got != "command,description,timeoutMs,workdir,run_in_background,tty" {
		t.Errorf("bash parameters: %s", got)
	}
	bashNoBg := noBg.ts.Tools()[0]
	if got := strings.Join(order(bashNoBg.InputSchema), ","); got != "command,description,timeoutMs,workdir" {
		t.Errorf("bash parameters with background disabled: %s", got)
	}
	var schema struct {
		Required   []string
		Properties map[string]struct{ Description string }
	}
	if err := json.Unmarshal(bash.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if strings.Join(schema.Required, ",") != "command,description" || schema.Properties["command"].Description != "The bash command to execute." {
		t.Errorf("bash schema: %+v", schema)
	}
	for _, want := range []string{"bash -c", "workdir", "cd", "[exit code: N]", "file", "run_in_background: true", "task_output", "task_kill",
		"The timeout is 120000 ms unless `timeoutMs` sets another, at most 600000 ms.", "A result holds at most 30000 bytes"} {
		if !strings.Contains(bash.Description, want) {
			t.Errorf("bash description lacks %q", want)
		}
	}
	// The numbers are the deployment's.
	yd := yield.ts.Tools()[0].Description
	for _, want := range []string{"The timeout is 90000 ms unless `timeoutMs` sets another, at most 300000 ms.", "A result holds at most 20000 bytes",
		"A call still running after 45000 ms moves to a background task by itself"} {
		if !strings.Contains(yd, want) {
			t.Errorf("bash description with a yield window lacks %q: %s", want, yd)
		}
	}
	if strings.Contains(bash.Description, "by itself") || strings.Contains(yieldNoBg.ts.Tools()[0].Description, "by itself") {
		t.Error("a deployment without a yield describes one")
	}
	// Every input schema refuses unknown keys.
	for _, tl := range e.ts.Tools() {
		var s struct {
			AdditionalProperties *bool `json:"additionalProperties"`
		}
		if err := json.Unmarshal(tl.InputSchema, &s); err != nil || s.AdditionalProperties == nil || *s.AdditionalProperties {
			t.Errorf("%s: input schema does not set additionalProperties: false", tl.Name)
		}
	}
	if !strings.HasSuffix(bashNoBg.Description, "Background execution is not available; long-running commands must finish within the timeout.") ||
		strings.Contains(bashNoBg.Description, "run_in_background") || strings.Contains(string(bashNoBg.InputSchema), "run_in_background") {
		t.Errorf("bash description with background disabled: %q", bashNoBg.Description)
	}
}

func TestStateDir(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	for _, tc := range []struct{ xdg, want string }{
		{"/var/state", "/var/state/conch"},
		{"", filepath.Join(home, ".local", "state", "conch")},
		{"relative/dir", filepath.Join(home, ".local", "state", "conch")},
	} {
		t.Setenv("XDG_STATE_HOME", tc.xdg)
		if got := tools.StateDir(); got != tc.want {
			t.Errorf("XDG_STATE_HOME=%q: StateDir() = %q, want %q", tc.xdg, got, tc.want)
		}
	}
}

// TestUnknownKeys: a key a tool does not take is refused before anything
// else is checked, with the parameter it most likely meant or the list of
// parameters the schema shows; the first unknown key in the object's order
// is the one named. Nothing is spawned.
func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	noBg := newEnv(t, envOpts{tools: tools.Options{DisableBackground: true}})
	noRuntime := newEnv(t, envOpts{noTasks: true})
	spawned := e.dir + "/spawned"
	cmd := `"command":"touch ` + spawned + `","description":"Touch a file"`
	const bashTakes = "; bash takes command, description, timeoutMs, workdir, run_in_background, tty"
	cases := []struct {
		name, tool string
		env        *env
		args, msg  string
	}{
		{"timeout_ms", tools.NameBash, e, `{` + cmd + `,"timeout_ms":5000}`, `unknown parameter "timeout_ms" (did you mean "timeoutMs"?)`},
		{"case", tools.NameBash, e, `{"Command":"true","description":"d"}`, `unknown parameter "Command" (did you mean "command"?)`},
		{"underscore", tools.NameBash, e, `{` + cmd + `,"work_dir":"/"}`, `unknown parameter "work_dir" (did you mean "workdir"?)`},
		{"typo", tools.NameBash, e, `{` + cmd + `,"run_in_backgrond":true}`, `unknown parameter "run_in_backgrond" (did you mean "run_in_background"?)`},
		{"distance_2", tools.NameBash, e, `{` + cmd + `,"timeout":5000}`, `unknown parameter "timeout" (did you mean "timeoutMs"?)`},
		{"env", tools.NameBash, e, `{` + cmd + `,"env":{"FOO":"x"}}`, `unknown parameter "env"` + bashTakes},
		{"stdin", tools.NameBash, e, `{` + cmd + `,"stdin":"x"}`, `unknown parameter "stdin"` + bashTakes},
		{"stdoutMaxBytes", tools.NameBash, e, `{` + cmd + `,"stdoutMaxBytes":3}`, `unknown parameter "stdoutMaxBytes"` + bashTakes},
		{"before_the_command_check", tools.NameBash, e, `{"cmd":"true"}`, `unknown parameter "cmd"` + bashTakes},
		{"first_in_order", tools.NameBash, e, `{"zzz":1,` + cmd + `,"env":{}}`, `unknown parameter "zzz"` + bashTakes},
		{"first_in_order_swapped", tools.NameBash, e, `{"env":{},` + cmd + `,"zzz":1}`, `unknown parameter "env"` + bashTakes},
		{"null_value", tools.NameBash, e, `{` + cmd + `,"env":null}`, `unknown parameter "env"` + bashTakes},
		{"background_disabled_listing", tools.NameBash, noBg, `{` + cmd + `,"background":true}`,
			`unknown parameter "background"; bash takes command, description, timeoutMs, workdir`},
		{"background_disabled_still_named", tools.NameBash, noBg, `{` + cmd + `,"run_in_background":true}`,
			"run_in_background is disabled for this deployment (enableRunInBackground: false)"},
		{"task_output", tools.NameTaskOutput, e, `{"task_id":"bash-1","timeoutMs":5}`, `unknown parameter "timeoutMs" (did you mean "timeout_ms"?)`},
		{"task_output_list", tools.NameTaskOutput, e, `{"id":"bash-1"}`, `unknown parameter "id"; task_output takes task_id, wait, timeout_ms`},
		{"task_list", tools.NameTaskList, e, `{"all":true}`, `unknown parameter "all"; task_list takes no parameters`},
		{"task_kill", tools.NameTaskKill, e, `{"task_id":"bash-1","signal":"KILL"}`, `unknown parameter "signal"; task_kill takes task_id, reason`},
		{"before_the_runtime_check", tools.NameTaskKill, noRuntime, `{"task_id":"bash-1","force":true}`, `unknown parameter "force"; task_kill takes task_id, reason`},
	}
	var all strings.Builder
	for _, c := range cases {
		r := c.env.ts.Call(t.Context(), c.env.sess, c.tool, json.RawMessage(c.args), nil)
		want := c.msg
		if strings.HasPrefix(want, "unknown parameter") {
			want = "invalid arguments: " + want
		}
		if !r.IsError || r.Text != "Error: "+want || r.Value != nil {
			t.Errorf("%s: %s\n got %q\nwant %q", c.name, c.args, r.Text, "Error: "+want)
		}
		all.WriteString(c.name + ": " + r.Text + "\n")
	}
	golden(t, "messages.txt", all.String())
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(spawned); err == nil {
		t.Fatal("a refused call spawned its command")
	}
	if id := e.background(e.sess, "true"); id != "bash-1" {
		t.Errorf("first real start got %s, want bash-1", id)
	}
}
