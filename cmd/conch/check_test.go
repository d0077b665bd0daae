//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

const checkConfig = `[rules]
deny = ["Bash(rm -rf:*)"]
ask = ["Bash(git push:*)"]
allow = ["Bash(ls:*)", "Bash(git status)", "Bash(echo:*)"]
`

func TestCheck(t *testing.T) {
	cfg := writeConfig(t, checkConfig)
	for _, tc := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"--config", cfg, "--", "ls -la && rm -rf build"},
			"deny\nls -la\nrm -rf build\nrule Bash(rm -rf:*): rm -rf build\n", 4},
		{[]string{"--config", cfg, "--", "git", "status", "&&", "git", "push"},
			"ask\ngit status\ngit push\nrule Bash(git push:*): git push\n", 3},
		{[]string{"--config=" + cfg, "ls $(echo hi)"},
			"allow\nls $(echo hi)\necho hi\nrule Bash(ls:*): ls $(echo hi)\n", 0},
		{[]string{"--config", cfg, "--", "cat <<EOF\n$(rm -rf x)\nEOF"},
			"deny\ncat\nrm -rf x\nrule Bash(rm -rf:*): rm -rf x\n", 4},
		{[]string{"--config", cfg, "--", "echo 'unterminated"}, "ask\ncannot parse\n", 3},
		{[]string{"--config", cfg, "--", "$CMD x"}, "ask\n$CMD x\ndynamic command: $CMD x\n", 3},
		{[]string{"--config", cfg, "--", "# nothing"}, "allow\nno commands\n", 0},
	} {
		out, stderr, code := testutil.RunConch(t, "", append([]string{"check"}, tc.args...)...)
		if out != tc.out || code != tc.code {
			t.Errorf("conch check %q:\n%s(exit %d, stderr %q); want\n%s(exit %d)", tc.args, out, code, stderr, tc.out, tc.code)
		}
	}
}

// conch check runs nothing, not even what a substitution would run.
func TestCheckRunsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, line := range []string{"touch " + marker, "ls $(touch " + marker + ")", "bash -c 'touch " + marker + "'"} {
		out, _, code := testutil.RunConch(t, "", "check", "--config", writeConfig(t, checkConfig), "--", line)
		if code != 0 || !strings.HasPrefix(out, "allow\n") {
			t.Errorf("conch check %q: %q exit %d", line, out, code)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("conch check %q ran the command", line)
		}
	}
}

func TestCheckDefaultConfig(t *testing.T) {
	xdg := t.TempDir()
	if err := os.Mkdir(filepath.Join(xdg, "conch"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "conch", "config.toml"), []byte("[rules]\nask = [\"Bash(npm publish:*)\"]\nunmatched = \"ask\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", xdg)
	if out, _, code := testutil.RunConch(t, "", "check", "npm publish --tag next"); code != 3 || out != "ask\nnpm publish --tag next\nrule Bash(npm publish:*): npm publish --tag next\n" {
		t.Errorf("with the default file: %q exit %d", out, code)
	}
	if out, _, code := testutil.RunConch(t, "", "check", "make"); code != 3 || out != "ask\nmake\nno rule matches: make\n" {
		t.Errorf("unmatched ask: %q exit %d", out, code)
	}
	// No file: no rules, everything is allowed.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if out, _, code := testutil.RunConch(t, "", "check", "rm -rf /"); code != 0 || out != "allow\nrm -rf /\nno rule matches: rm -rf /\n" {
		t.Errorf("without a file: %q exit %d", out, code)
	}
}

func TestCheckErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		config string // "" for a missing file
		args   []string
		stderr string
	}{
		{"", []string{"ls"}, "conch check: config " + filepath.Join(dir, "config.toml") + ": no such file or directory\n"},
		{"[rules]\ndeny = [\"rm -rf\"]\n", []string{"ls"},
			"conch check: config " + filepath.Join(dir, "config.toml") + ":2: rules.deny: rule \"rm -rf\": expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)\n"},
		{"[rules]\nask = \"Bash(x)\"\n", []string{"ls"},
			"conch check: config " + filepath.Join(dir, "config.toml") + ":2: rules.ask: takes a list of strings\n"},
		{"rules.unmatched = \"deny\"\n", []string{"ls"},
			"conch check: config " + filepath.Join(dir, "config.toml") + ":1: rules.unmatched: expected \"allow\" or \"ask\", got \"deny\"\n"},
		{"[rules]\nunmatched = [\"ask\"]\n", []string{"ls"},
			"conch check: config " + filepath.Join(dir, "config.toml") + ":2: rules.unmatched: takes one value, not a list\n"},
		{"[rules]\nalow = []\n", []string{"ls"},
			"conch check: config " + filepath.Join(dir, "config.toml") + ":2: rules.alow: unknown key\n"},
		{"timeout_ms = 5\n", []string{"--", "  "}, "conch check: no command line\n"},
	} {
		p := filepath.Join(dir, "config.toml")
		os.Remove(p)
		if tc.config != "" {
			if err := os.WriteFile(p, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, stderr, code := testutil.RunConch(t, "", append([]string{"check", "--config", p}, tc.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(stderr, tc.stderr) {
			t.Errorf("config %q: stdout %q stderr %q exit %d; want stderr %q exit 2", tc.config, out, stderr, code, tc.stderr)
		}
	}
}

// run, serve and acp read the same rules; a bad rule stops them at start.
func TestRulesConfigured(t *testing.T) {
	cfg := writeConfig(t, checkConfig)
	out, _, code := testutil.RunConch(t, "", "run", "--config", cfg, "--", "ls && rm -rf x")
	if code != 125 || out != "Error: denied by rule Bash(rm -rf:*): rm -rf x\n" {
		t.Errorf("conch run: %q exit %d", out, code)
	}
	out, _, code = testutil.RunConch(t, "", "run", "--config", cfg, "--", "git push")
	if want := "Error: not run: git push needs approval (rule Bash(git push:*)), but this client cannot ask the user; allow it in the conch configuration or run it yourself\n"; code != 125 || out != want {
		t.Errorf("conch run: %q exit %d", out, code)
	}
	bad := writeConfig(t, "[rules]\nallow = [\"Bash(ls\"]\n")
	for _, sub := range []string{"run", "serve", "acp"} {
		args := []string{sub, "--config", bad}
		if sub == "run" {
			args = append(args, "--", "ls")
		}
		_, stderr, code := testutil.RunConch(t, "", args...)
		if want := "conch " + sub + ": config " + bad + ":2: rules.allow: rule \"Bash(ls\": expected Bash(<command>), Bash(<prefix>:*) or Bash(<glob with *>)\n"; code != 2 || stderr != want {
			t.Errorf("conch %s with a bad rule: %q exit %d; want %q", sub, stderr, code, want)
		}
	}
}
