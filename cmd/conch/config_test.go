//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFile: the file sets the same settings as the flags, a flag
// wins over it, and conch config says where each value came from.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "# conch\ntimeout_ms = 300\nmax_result_bytes = 1000\ntoken = \"s3cret\"\n\n[env]\npass = [\"GITHUB_TOKEN\"]\n")

	// The file's timeout applies to conch run.
	stdout, stderr, code := testutil.RunConch(t, marker, "run", "--config", p, "--", "sleep 5")
	if code != exitTimedOut || !strings.Contains(stdout, "[timed out after 300ms]") {
		t.Errorf("run with timeout_ms = 300: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// A flag wins over the file.
	stdout, _, code = testutil.RunConch(t, marker, "run", "--config", p, "--timeout-ms", "5000", "--", "sleep 0.5; echo done")
	if code != 0 || stdout != "done\n" {
		t.Errorf("run with --timeout-ms over the file: exit %d, stdout %q", code, stdout)
	}

	stdout, stderr, code = testutil.RunConch(t, marker, "config", "--config", p, "--grace-ms", "100", "--network", "on")
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{
		"# configuration file: " + p,
		"timeout_ms = 300  # " + p + ":2",
		"max_result_bytes = 1000  # " + p + ":3",
		"token = (set)  # " + p + ":4",
		`env.pass = ["GITHUB_TOKEN"]  # ` + p + ":7",
		"grace_ms = 100  # flag",
		"max_tasks = 10  # default",
		`provider = "auto"  # default`,
		"yield_ms = 45000  # default",
		// The contract's defaults; a value given, even the default's,
		// says so (a given sandbox must hold, the default degrades).
		`containment.mode = "auto"  # default`,
		`sandbox.mode = "workspace-write"  # default`,
		`sandbox.network.mode = "on"  # flag`,
		`sandbox.network.allow = []  # default`,
		`sandbox.network.ask = true  # default`,
		`sandbox.escalation = "ask"  # default`,
	} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, stdout)
		}
	}
	if strings.Contains(stdout, "s3cret") {
		t.Errorf("conch config shows the token:\n%s", stdout)
	}
	// The network mode by its older key, and by the new one; both is an
	// error naming the second.
	old := writeConfig(t, "[sandbox]\nnetwork = \"off\"\n")
	if stdout, _, _ := testutil.RunConch(t, marker, "config", "--config", old); !strings.Contains(stdout, `sandbox.network.mode = "off"  # `+old+":2\n") {
		t.Errorf("conch config with sandbox.network = \"off\":\n%s", stdout)
	}
	table := writeConfig(t, "[sandbox.network]\nmode = \"allowlist\"\nallow = [\"*.github.com\", \"10.0.0.0/8:22\"]\n")
	if stdout, _, _ := testutil.RunConch(t, marker, "config", "--config", table); !strings.Contains(stdout, `sandbox.network.mode = "allowlist"  # `+table+":2\n") ||
		!strings.Contains(stdout, `sandbox.network.allow = ["*.github.com", "10.0.0.0/8:22"]  # `+table+":3\n") {
		t.Errorf("conch config with [sandbox.network]:\n%s", stdout)
	}
	both := writeConfig(t, "[sandbox]\nnetwork = \"off\"\n[sandbox.network]\nmode = \"on\"\n")
	if _, stderr, code := testutil.RunConch(t, marker, "config", "--config", both); code != 2 || !strings.Contains(stderr, both+":4: sandbox.network.mode: the network mode is already set at "+both+":2") {
		t.Errorf("both keys: exit %d, stderr %q", code, stderr)
	}
	badPattern := writeConfig(t, "[sandbox.network]\ndeny = [\"exa mple.com\"]\n")
	if _, stderr, code := testutil.RunConch(t, marker, "config", "--config", badPattern); code != 2 || !strings.Contains(stderr, badPattern+":2: sandbox.network.deny: network pattern") {
		t.Errorf("a bad pattern: exit %d, stderr %q", code, stderr)
	}
	// The sandbox's escalation, from the file.
	never := writeConfig(t, "[sandbox]\nescalation = \"never\"\n")
	if stdout, _, _ := testutil.RunConch(t, marker, "config", "--config", never); !strings.Contains(stdout, `sandbox.escalation = "never"  # `+never+":2\n") {
		t.Errorf("conch config with escalation never:\n%s", stdout)
	}
	// conch run has no yield by default.
	if stdout, _, _ := testutil.RunConch(t, marker, "config", "run", "--config", p); !strings.Contains(stdout, "yield_ms = 0  # default\n") {
		t.Errorf("conch config run:\n%s", stdout)
	}
}

// TestConfigFileDefaultPath: without --config the file under
// $XDG_CONFIG_HOME is read when it exists.
func TestConfigFileDefaultPath(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "conch"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, "conch", "config.toml")
	if err := os.WriteFile(p, []byte("max_tasks = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testutil.ConchBinary(t), "config")
	cmd.Env = append(testutil.Env(marker), "XDG_CONFIG_HOME="+home)
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "max_tasks = 3  # "+p+":1\n") {
		t.Errorf("conch config: %v\n%s", err, out)
	}
}

// TestConfigFileRefused: a bad file stops every subcommand at start with
// the file, the line and the key, and exit status 2.
func TestConfigFileRefused(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	for _, c := range []struct{ text, want string }{
		{"timeout_ms = 1\nbogus = 2\n", ":2: bogus: unknown key"},
		{"\n\ntimeout_ms = -5\n", ":3: timeout_ms: must be a positive finite number"},
		{"provider = \"ssh\"\n", ":1: provider: must be one of: auto, local, contained"},
		{"[env]\npass = \"GITHUB_TOKEN\"\n", ":2: env.pass: takes a list of strings"},
		{"timeout_ms = [1]\n", ":1: timeout_ms: takes one value, not a list"},
		{"timeout_ms = \n", ":1: "},
		{"[sandbox]\nescalation = \"always\"\n", ":2: sandbox.escalation: must be one of: ask, never"},
	} {
		p := writeConfig(t, c.text)
		for _, sub := range [][]string{{"run", "--config", p, "--", "true"}, {"serve", "--config", p}, {"acp", "--config", p}, {"config", "--config", p}} {
			_, stderr, code := testutil.RunConch(t, marker, sub...)
			if code != 2 || !strings.Contains(stderr, "config "+p+c.want) {
				t.Errorf("conch %s with %q: exit %d, stderr %q; want exit 2 and %q", sub[0], c.text, code, stderr, "config "+p+c.want)
			}
		}
	}
	_, stderr, code := testutil.RunConch(t, marker, "serve", "--config", "/nonexistent/conch.toml")
	if code != 2 || !strings.Contains(stderr, "config /nonexistent/conch.toml: no such file or directory") {
		t.Errorf("a missing --config file: exit %d, stderr %q", code, stderr)
	}
}

// TestHarness: the three subcommands print --help on stdout and refuse a
// bad flag with its name and exit status 2.
func TestHarness(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	for _, sub := range []string{"run", "serve", "acp", "config"} {
		stdout, stderr, code := testutil.RunConch(t, marker, sub, "--help")
		if code != 0 || !strings.Contains(stdout, "Usage: conch "+sub) || !strings.Contains(stdout, "-config FILE") || stderr != "" {
			t.Errorf("conch %s --help: exit %d, stdout %q, stderr %q", sub, code, stdout, stderr)
		}
		_, stderr, code = testutil.RunConch(t, marker, sub, "--max-tasks", "1.5")
		if code != 2 || !strings.Contains(stderr, `invalid value "1.5" for flag -max-tasks: must be a whole number`) {
			t.Errorf("conch %s --max-tasks 1.5: exit %d, stderr %q", sub, code, stderr)
		}
	}
}
