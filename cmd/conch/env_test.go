//go:build linux

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// secretEnv are server variables that must not reach a command, each
// with a value that must not appear in the log either.
var secretEnv = []string{
	"DATABASE_URL=postgres://u:dbpw-7f3a@h/db",
	"OPENAI_API_KEY=sk-test-openai-9c1e5b7d2a4f6e8c",
	"SESSION_COOKIE=cookie-4b2d8e",
	"PS4=$(echo ps4-ran >&2)",
}

// TestScrubLogNamesNoValue: serve and acp log, at start, the names of
// the variables commands do not inherit, and never a value; a name given
// with --pass-env is not among them.
func TestScrubLogNamesNoValue(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"serve", "acp"} {
		cmd := exec.Command(testutil.ConchBinary(t), sub, "--pass-env", "KEEP_TOKEN")
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "KEEP_TOKEN=kept-5e1f")
		cmd.Env = append(cmd.Env, secretEnv...)
		cmd.Stdin = strings.NewReader("") // stdio ends at once
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("conch %s: %v\n%s", sub, err, stderr.String())
		}
		log := stderr.String()
		if !strings.Contains(log, `msg="commands do not inherit these variables (--pass-env NAME passes one)" names=`) {
			t.Errorf("conch %s logged no scrubbed names:\n%s", sub, log)
		}
		for _, kv := range secretEnv {
			name, value, _ := strings.Cut(kv, "=")
			if !strings.Contains(log, name) {
				t.Errorf("conch %s: %s not named in the log", sub, name)
			}
			if strings.Contains(log, value) {
				t.Errorf("conch %s: the value of %s is in the log:\n%s", sub, name, log)
			}
		}
		if strings.Contains(log, "KEEP_TOKEN") || strings.Contains(log, "kept-5e1f") {
			t.Errorf("conch %s: the passed variable is in the log:\n%s", sub, log)
		}
	}
}

// TestRunPassEnv: --pass-env (repeatable) lets a scrubbed name through
// to the command; every other secret stays out, and PS4 runs nothing.
func TestRunPassEnv(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "run", "--pass-env", "KEEP_TOKEN", "--pass-env", "ALSO_SECRET", "--",
		`set -x; echo "$KEEP_TOKEN $ALSO_SECRET [$DATABASE_URL$OPENAI_API_KEY$SESSION_COOKIE]"`)
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(),
		"KEEP_TOKEN=kept-5e1f", "ALSO_SECRET=also-8d2c")
	cmd.Env = append(cmd.Env, secretEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conch run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "kept-5e1f also-8d2c []\n") || strings.Contains(string(out), "ps4-ran") {
		t.Errorf("conch run printed %q", out)
	}
}

// TestPassEnvFlag: a value that cannot be a variable name is refused.
func TestPassEnvFlag(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "A=b"} {
		_, stderr, code := testutil.RunConch(t, "", "run", "--pass-env", bad, "--", "true")
		if want := `invalid value "` + bad + `" for flag -pass-env: must be a variable name`; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("--pass-env %q: exit %d, stderr %q; want 2 and %q", bad, code, stderr, want)
		}
	}
}
