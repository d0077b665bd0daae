//go:build linux

package hosttest_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/hosttest"
)

// TestClaudeCodeStateless: Claude Code 2.1.332 speaks MCP 2026-07-28 to
// conch on stdio (server/discover, no initialize), and a rule's question
// reaches its Elicitation hook by multi round-trip (input_required, then
// the retry with the answer): the command runs once, after the answer.
// conch's own log, kept by a wrapper, says which revision each call
// used.
func TestClaudeCodeStateless(t *testing.T) {
	t.Parallel()
	conch, marker, dir, _ := begin(t)
	etc := t.TempDir()
	config := filepath.Join(etc, "conch.toml")
	writeFile(t, config, "[rules]\nask = [\"Bash(echo:*)\"]\n", 0o600)
	logFile := filepath.Join(etc, "conch.log")
	wrapper := filepath.Join(etc, "conch.sh")
	writeFile(t, wrapper, "#!/bin/sh\nexec "+conch+" \"$@\" 2>>"+logFile+"\n", 0o700)
	hook := filepath.Join(etc, "answer-conch.sh")
	writeFile(t, hook, `#!/bin/sh
cat >/dev/null
echo '{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"accept","content":{"decision":"Allow once"}}}'
`, 0o700)
	api := hosttest.NewAnthropic(t, hosttest.Script(hosttest.Bash("echo asked yes")))
	settings := hosttest.JSON(map[string]any{"hooks": map[string]any{"Elicitation": []any{
		map[string]any{"matcher": "", "hooks": []any{map[string]any{"type": "command", "command": hook}}}}}})
	claude := hosttest.NewClaude(t, hosttest.Claude332)
	r := hosttest.Run{Dir: dir, Home: t.TempDir(), Marker: marker, Prompt: "Ask."}
	claude.Command(t, r, "mcp", "add", "conch", "--", wrapper, "serve", "--config", config, "--log-level", "debug")
	claude.Run(t, api, r, "", "--settings", settings)
	results := api.Results()
	if len(results) != 1 {
		t.Fatalf("%d results: %+v", len(results), results)
	}
	if g, err := parse(results[0], false); err != nil || g.text != "asked yes\n" {
		t.Errorf("the asked command's result: %q (%v), want it run", results[0].Text(), err)
	}
	logs := readFile(t, logFile)
	for _, want := range []string{
		`msg="tool call asks by multi round-trip" session=stdio tool=bash protocol=2026-07-28 retry=false`,
		`msg="tool call asks by multi round-trip" session=stdio tool=bash protocol=2026-07-28 retry=true`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("conch's log lacks %q:\n%s", want, logs)
		}
	}
}
