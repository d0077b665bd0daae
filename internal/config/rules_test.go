package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Keys of other settings are left to their owners.
func TestRulesIgnoresOtherKeys(t *testing.T) {
	entries, err := Parse("c.toml", []byte("timeout_ms = 5\n[env]\npass = [\"A\"]\n[rules]\ndeny = [\"Bash(rm:*)\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Rules(entries)
	if err != nil || len(r.Deny) != 1 || r.Deny[0].String() != "Bash(rm:*)" {
		t.Fatalf("Rules = %+v, %v", r, err)
	}
}

// writeProject writes dir's project file.
func writeProject(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, ProjectFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A project file adds deny and ask rules.
func TestProjectRules(t *testing.T) {
	dir := t.TempDir()
	writeProject(t, dir, "[rules]\ndeny = [\"Bash(git push:*)\"]\nask = [\"Bash(npm publish:*)\"]\n")
	entries, err := LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	proj, err := ParseProject(entries)
	if err != nil {
		t.Fatal(err)
	}
	if r := proj.Rules; len(r.Deny) != 1 || r.Deny[0].String() != "Bash(git push:*)" || len(r.Ask) != 1 || len(r.Allow) != 0 {
		t.Fatalf("ParseProject = %+v", proj)
	}
}

// Anything that could widen, or is not a rule, is refused with the file,
// the line and the key.
func TestProjectRulesRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"[rules]\ndeny = [\"Bash(rm:*)\"]\nallow = [\"Bash(git push:*)\"]\n", ":3: rules.allow: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)"},
		{"[rules]\nunmatched = \"allow\"\n", ":2: rules.unmatched: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)"},
		{"timeout_ms = 5\n", ":1: timeout_ms: a project file may only add rules.deny, rules.ask, sandbox.deny_read and sandbox.network.deny, and set a stricter sandbox.mode or network mode (sandbox.network.mode, with allow and ask when it narrows to allowlist)"},
		{"[rules]\ndeny = \"Bash(rm:*)\"\n", ":2: rules.deny: takes a list of strings"},
		{"[rules]\nask = [\"rm\"]\n", ":2: rules.ask: rule \"rm\": expected"},
	} {
		dir := t.TempDir()
		p := writeProject(t, dir, c.text)
		entries, err := LoadProject(dir)
		if err == nil {
			_, err = ParseProject(entries)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "config "+p+c.want) {
			t.Errorf("%q: error %v, want config %s%s…", c.text, err, p, c.want)
		}
	}
}

// No file, no rules; a symbolic link inside the project is followed, one
// out of it is refused; a FIFO is refused without blocking.
func TestLoadProjectFile(t *testing.T) {
	none, err := LoadProject(t.TempDir())
	if none != nil || err != nil {
		t.Errorf("no file: %v, %v", none, err)
	}

	inside := t.TempDir()
	if err := os.Mkdir(filepath.Join(inside, ".conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inside, "shared.toml"), []byte("[rules]\ndeny = [\"Bash(rm:*)\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared.toml", filepath.Join(inside, ProjectFile)); err != nil {
		t.Fatal(err)
	}
	if entries, err := LoadProject(inside); err != nil || len(entries) != 1 {
		t.Errorf("link inside the project: %v, %v", entries, err)
	}

	// Elsewhere, a file whose key an error would name.
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "config.toml"), []byte("api_key = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, link := range []struct{ from, to string }{
		{ProjectFile, filepath.Join(elsewhere, "config.toml")}, // the file
		{".conch", elsewhere}, // its directory
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, link.from)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link.to, filepath.Join(dir, link.from)); err != nil {
			t.Fatal(err)
		}
		entries, err := LoadProject(dir)
		if err == nil || strings.Contains(err.Error(), "api_key") {
			t.Errorf("link %s out of the project: %v, %v; want an error naming no key", link.from, entries, err)
		}
	}

	fifo := t.TempDir()
	if err := os.Mkdir(filepath.Join(fifo, ".conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(fifo, ProjectFile), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := LoadProject(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("FIFO: %v, want %v", err, ErrNotRegular)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LoadProject blocked on a FIFO")
	}
}
