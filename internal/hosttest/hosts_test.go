//go:build linux

package hosttest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/hosttest"
	"github.com/conch-dev/conch/internal/testutil"
)

// serveArgs are conch serve's arguments in the scenario.
var serveArgs = []string{"serve", "--yield-ms", "1500"}

// session is a host run's directory (its working directory, the session's
// through roots) and the path the scenario's command may not write.
func session(t *testing.T) (dir, denied string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Outside every writable root: /etc is not one, and as root the
	// sandbox alone stops the write.
	return dir, "/etc/conch-hosttest-" + strings.ReplaceAll(filepath.Base(dir), "_", "-")
}

// TestClaudeCode runs the scenario in Claude Code 2.1.197 and 2.1.332,
// conch on stdio, with the README's recipe for `claude -p`: the model
// reads each result as the structured value, "text" first, byte for byte,
// within the budget.
func TestClaudeCode(t *testing.T) {
	for _, host := range []string{hosttest.Claude197, hosttest.Claude332} {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			conch, marker, dir, denied := begin(t)
			steps := scenario(dir, denied)
			api := hosttest.NewAnthropic(t, next(t, steps, false))
			out := hosttest.NewClaude(t, host).Run(t, api, hosttest.Run{Dir: dir, Marker: marker, Prompt: "Run the scenario."},
				hosttest.JSON(map[string]any{"mcpServers": map[string]any{"conch": map[string]any{"command": conch, "args": serveArgs}}}))
			finish(t, host, out, api, steps, false)
		})
	}
}

// TestCodex runs the scenario in Codex CLI 0.171.0, conch on stdio, with
// the README's recipe (default_tools_approval_mode = "approve"): the model
// reads "Wall time: <s> seconds\nOutput:\n" and then the structured value,
// byte for byte, within the budget.
func TestCodex(t *testing.T) {
	t.Parallel()
	conch, marker, dir, denied := begin(t)
	steps := scenario(dir, denied)
	api := hosttest.NewOpenAI(t, next(t, steps, true))
	out := hosttest.NewCodex(t).Run(t, api, hosttest.Run{Dir: dir, Marker: marker, Prompt: "Run the scenario."},
		`[mcp_servers.conch]
command = "`+conch+`"
args = ["`+strings.Join(serveArgs, `", "`)+`"]
default_tools_approval_mode = "approve"
`+markerEnv(marker))
	finish(t, "Codex", out, api, steps, true)
}

// httpSteps are the scenario's steps that run over HTTP too: a plain
// result, one that JSON escaping multiplies, and a notice.
func httpSteps(dir, denied string) []step {
	var out []step
	for _, s := range scenario(dir, denied) {
		switch s.name {
		case "echo", "200000_quotes", "background", "notice":
			out = append(out, s)
		}
	}
	return out
}

// TestClaudeCodeHTTP: Claude Code 2.1.332 with conch over streamable
// HTTP, the README's recipe: `claude mcp add --transport http` with the
// header 'Authorization: Bearer ${CONCH_TOKEN}', so that the token comes
// from the client's environment when it connects, never from a file a
// command could read (a wrong token would drop the server: no result).
// 2.1.332 first probes server/discover (MCP 2026-07-28) and falls back to
// initialize.
func TestClaudeCodeHTTP(t *testing.T) {
	t.Parallel()
	conch, marker, dir, denied := begin(t)
	srv := hosttest.ServeHTTP(t, conch, marker, dir, serveArgs[1:]...)
	steps := httpSteps(dir, denied)
	api := hosttest.NewAnthropic(t, next(t, steps, false))
	claude := hosttest.NewClaude(t, hosttest.Claude332)
	r := hosttest.Run{Dir: dir, Home: t.TempDir(), Marker: marker, Prompt: "Run the scenario.", Env: []string{"CONCH_TOKEN=" + srv.Token}}
	claude.Command(t, r, "mcp", "add", "--transport", "http", "conch", srv.URL, "--header", "Authorization: Bearer ${CONCH_TOKEN}")
	if strings.Contains(readFile(t, filepath.Join(r.Home, ".claude.json")), srv.Token) {
		t.Error("the token is in Claude Code's configuration file")
	}
	out := claude.Run(t, api, r, "")
	finish(t, "Claude Code over HTTP", out, api, steps, false)
}

// TestCodexHTTP: Codex with conch over streamable HTTP, the README's
// recipe: bearer_token_env_var names the variable that holds the token,
// and the tools conch marks destructive are approved one by one.
func TestCodexHTTP(t *testing.T) {
	t.Parallel()
	conch, marker, dir, denied := begin(t)
	srv := hosttest.ServeHTTP(t, conch, marker, dir, serveArgs[1:]...)
	steps := httpSteps(dir, denied)
	api := hosttest.NewOpenAI(t, next(t, steps, true))
	out := hosttest.NewCodex(t).Run(t, api,
		hosttest.Run{Dir: dir, Marker: marker, Prompt: "Run the scenario.", Env: []string{"CONCH_TOKEN=" + srv.Token}},
		`[mcp_servers.conch]
url = "`+srv.URL+`"
bearer_token_env_var = "CONCH_TOKEN"

[mcp_servers.conch.tools.bash]
approval_mode = "approve"

[mcp_servers.conch.tools.task_kill]
approval_mode = "approve"

[mcp_servers.conch.tools.task_input]
approval_mode = "approve"
`)
	finish(t, "Codex over HTTP", out, api, steps, true)
}

// TestClaudeCodeElicitationHook: in -p mode Claude Code answers conch's
// questions itself unless an Elicitation hook does; the README's hook
// answers a rule's question with "Allow once", and the command runs. The
// hook gets the question on stdin.
func TestClaudeCodeElicitationHook(t *testing.T) {
	for _, host := range []string{hosttest.Claude197, hosttest.Claude332} {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			conch, marker, dir, _ := begin(t)
			etc := t.TempDir()
			config := filepath.Join(etc, "conch.toml")
			writeFile(t, config, "[rules]\nask = [\"Bash(echo:*)\"]\n", 0o600)
			asked := filepath.Join(etc, "question.json")
			hook := filepath.Join(etc, "answer-conch.sh")
			// The README's hook, plus a copy of the question for the test.
			writeFile(t, hook, `#!/bin/sh
tee `+asked+` >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"accept","content":{"decision":"Allow once"}}}'
`, 0o700)
			api := hosttest.NewAnthropic(t, hosttest.Script(hosttest.Bash("echo asked yes")))
			settings := hosttest.JSON(map[string]any{"hooks": map[string]any{"Elicitation": []any{
				map[string]any{"matcher": "", "hooks": []any{map[string]any{"type": "command", "command": hook}}}}}})
			// The README's stdio recipe: claude mcp add, then claude -p.
			claude := hosttest.NewClaude(t, host)
			r := hosttest.Run{Dir: dir, Home: t.TempDir(), Marker: marker, Prompt: "Ask."}
			claude.Command(t, r, "mcp", "add", "conch", "--", conch, "serve", "--config", config)
			out := claude.Run(t, api, r, "", "--settings", settings)
			t.Logf("%s ran in %v", host, out.Elapsed)
			results := api.Results()
			if len(results) != 1 {
				t.Fatalf("%d results: %+v", len(results), results)
			}
			g, err := parse(results[0], false)
			if err != nil || g.text != "asked yes\n" {
				t.Errorf("the asked command's result: %q (%v), want it run", results[0].Text(), err)
			}
			q := readFile(t, asked)
			for _, want := range []string{`"conch"`, "echo asked yes", `"decision"`, "Allow once"} {
				if !strings.Contains(q, want) {
					t.Errorf("the hook's question lacks %s:\n%s", want, q)
				}
			}
		})
	}
}

// TestCodexNeedsApproval: without an approval mode, `codex exec` refuses
// every call of a tool conch marks destructive (bash, task_kill,
// task_input: they run, stop or type into commands), and lets the
// read-only ones through (task_list, task_output). This is why the
// recipes approve them.
func TestCodexNeedsApproval(t *testing.T) {
	t.Parallel()
	conch, marker, dir, _ := begin(t)
	api := hosttest.NewOpenAI(t, hosttest.Script(hosttest.Bash("echo hi"), hosttest.Call{Tool: "task_list", Args: map[string]any{}}))
	hosttest.NewCodex(t).Run(t, api, hosttest.Run{Dir: dir, Marker: marker, Prompt: "Try."},
		"[mcp_servers.conch]\ncommand = \""+conch+"\"\nargs = [\"serve\"]\n"+markerEnv(marker))
	results := api.Results()
	if len(results) != 2 {
		t.Fatalf("%d results: %+v", len(results), results)
	}
	if got := results[0].Text(); !strings.Contains(got, "requires approval") || strings.Contains(got, `"text"`) {
		t.Errorf("bash without approval: %q, want Codex's refusal", got)
	}
	if g, err := parse(results[1], true); err != nil || g.text != "(no background tasks)" {
		t.Errorf("task_list without approval: %q (%v), want it run", results[1].Text(), err)
	}
}

// markerEnv passes the test's marker to conch serve under Codex, which
// gives an MCP server only a few variables of its own environment: the
// one addition to the README's recipe, so that the test sees every
// process conch and its commands leave behind.
func markerEnv(marker string) string {
	return "\n[mcp_servers.conch.env]\n" + testutil.MarkerEnv + " = \"" + marker + "\"\n"
}

// begin is what every host test starts with: the conch binary, a marker
// whose processes must all be gone when the test ends, and a session's
// directory with the path its commands may not write.
func begin(t *testing.T) (conch, marker, dir, denied string) {
	t.Helper()
	conch = conchBinary(t)
	marker = testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	dir, denied = session(t)
	return conch, marker, dir, denied
}

// fake is a fake model API.
type fake interface {
	Results() []hosttest.Result
	Problems() []string
}

// finish checks what the fake model of a host run received against
// steps.
func finish(t *testing.T, host string, out hosttest.Output, api fake, steps []step, codex bool) {
	t.Helper()
	t.Logf("%s ran in %v", host, out.Elapsed)
	if p := api.Problems(); len(p) > 0 {
		t.Errorf("the fake model's problems: %q", p)
	}
	checkScenario(t, host, steps, api.Results(), codex)
}
