//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// The composition root turns project files on: a project's deny rule
// stops a command the user's rules allow, in the project only.
func TestProjectFileConfigured(t *testing.T) {
	cfg := writeConfig(t, checkConfig)
	project := t.TempDir()
	p := filepath.Join(project, ".conch", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("[rules]\ndeny = [\"Bash(echo:*)\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := testutil.RunConch(t, "", "run", "--config", cfg, "--cwd", project, "--", "echo hi")
	if code != 125 || out != "Error: denied by rule Bash(echo:*): echo hi\n" {
		t.Errorf("conch run in the project: %q exit %d", out, code)
	}
	out, _, code = testutil.RunConch(t, "", "run", "--config", cfg, "--cwd", t.TempDir(), "--", "echo hi")
	if code != 0 || out != "hi\n" {
		t.Errorf("conch run elsewhere: %q exit %d", out, code)
	}
}

// checkIn runs conch check with args in dir.
func checkIn(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := testutil.Conch(t, "", append([]string{"check"}, args...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// conch check decides by the project file of the current directory too,
// and names a refused one.
func TestCheckProjectFile(t *testing.T) {
	project := t.TempDir()
	p := filepath.Join(project, ".conch", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func() (string, string, int) { return checkIn(t, project, "--", "ls && git push origin") }
	if err := os.WriteFile(p, []byte("[rules]\ndeny = [\"Bash(git push:*)\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := check(); code != 4 || out != "deny\nls\ngit push origin\nrule Bash(git push:*): git push origin\n" {
		t.Errorf("conch check in the project: %q exit %d", out, code)
	}
	if err := os.WriteFile(p, []byte("[rules]\nallow = [\"Bash(git push:*)\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "conch check: config " + p + ":2: rules.allow: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)\n"
	if out, stderr, code := check(); code != 2 || out != "" || stderr != want {
		t.Errorf("conch check with a refused project file: %q %q exit %d; want %q", out, stderr, code, want)
	}
}

// conch config prints the rules with their sources: the user's file,
// the defaults, and what the project file of the cwd setting adds.
func TestConfigRules(t *testing.T) {
	cfg := writeConfig(t, "[rules]\ndeny = [\"Bash(rm -rf:*)\"]\nunmatched = \"ask\"\n")
	project := t.TempDir()
	p := filepath.Join(project, ".conch", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("[rules]\nask = [\"Bash(git push:*)\", \"Bash(npm publish:*)\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := testutil.RunConch(t, "", "config", "--config", cfg, "--cwd", project)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	want := `rules.deny = ["Bash(rm -rf:*)"]  # ` + cfg + `:2
rules.ask = []  # default
rules.allow = []  # default
rules.unmatched = "ask"  # ` + cfg + `:3
# project file: ` + p + `
rules.ask += ["Bash(git push:*)", "Bash(npm publish:*)"]  # ` + p + `:2
`
	if !strings.HasSuffix(out, want) {
		t.Errorf("conch config:\n%s\nwant it to end with:\n%s", out, want)
	}

	elsewhere := t.TempDir()
	out, _, _ = testutil.RunConch(t, "", "config", "run", "--cwd", elsewhere)
	if want := "rules.unmatched = \"allow\"  # default\n# project file: none in " + elsewhere + "\n"; !strings.HasSuffix(out, want) {
		t.Errorf("conch config without rules:\n%s\nwant it to end with:\n%s", out, want)
	}

	if err := os.WriteFile(p, []byte("[rules]\nunmatched = \"allow\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = testutil.RunConch(t, "", "config", "--cwd", project)
	if want := "conch config: config " + p + ":2: rules.unmatched: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)\n"; code != 2 || stderr != want {
		t.Errorf("conch config with a refused project file: %q exit %d; want %q", stderr, code, want)
	}
}

// conch config and conch check show the sandbox keys a project file
// narrows, and refuse one that would widen the configured sandbox.
func TestProjectSandboxShown(t *testing.T) {
	project := t.TempDir()
	p := filepath.Join(project, ".conch", "config.toml")
	writeFile(t, p, "[rules]\ndeny = [\"Bash(git push:*)\"]\n\n[sandbox]\nmode = \"read-only\"\nnetwork = \"off\"\ndeny_read = [\"secrets\"]\n")
	out, stderr, code := testutil.RunConch(t, "", "config", "run", "--cwd", project)
	want := "# project file: " + p + `
rules.deny += ["Bash(git push:*)"]  # ` + p + `:2
sandbox.mode = "read-only"  # ` + p + `:5
sandbox.network = "off"  # ` + p + `:6
sandbox.deny_read += ["secrets"]  # ` + p + `:7
`
	if code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("conch config: exit %d, stderr %q\n%s\nwant it to end with:\n%s", code, stderr, out, want)
	}
	check := func(args ...string) (string, string, int) { return checkIn(t, project, args...) }
	out, stderr, code = check("--", "ls")
	want = "allow\nls\n" + `no rule matches: ls
sandbox.mode = "read-only"  # ` + p + `:5
sandbox.network = "off"  # ` + p + `:6
sandbox.deny_read = ["secrets"]  # ` + p + `:7
`
	if code != 0 || out != want {
		t.Errorf("conch check: exit %d, stderr %q\n%q\nwant\n%q", code, stderr, out, want)
	}

	writeFile(t, p, "[sandbox]\nmode = \"full-access\"\n")
	const wide = ":2: sandbox.mode: full-access is wider than the session's workspace-write; a project file may only narrow the sandbox\n"
	if _, stderr, code := testutil.RunConch(t, "", "config", "run", "--cwd", project); code != 2 || stderr != "conch config: config "+p+wide {
		t.Errorf("conch config with a widening project: %q exit %d", stderr, code)
	}
	if _, stderr, code := check("--", "ls"); code != 2 || stderr != "conch check: config "+p+wide {
		t.Errorf("conch check with a widening project: %q exit %d", stderr, code)
	}
	if _, stderr, code := testutil.RunConch(t, "", "config", "run", "--sandbox", "full-access", "--cwd", project); code != 0 {
		t.Errorf("conch config under full-access: %q exit %d", stderr, code)
	}
}
