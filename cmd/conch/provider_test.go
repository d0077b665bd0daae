//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// pid1 is a command that prints the command line of its PID namespace's
// pid 1: conch's init (`… __init`) under containment, the machine's init
// without.
const pid1 = `tr '\0' ' ' </proc/1/cmdline`

// TestProvider: --provider names the executor. auto (the default) and
// contained run commands in an init, local runs them without one, each
// named on the start-up line and by conch doctor; contained refuses to
// start where the host allows no init, as --containment require does; an
// explicit --containment that contradicts the provider is refused naming
// both flags, from the command line or the file, while --containment auto
// leaves the choice to the provider; a sandbox or a limit given to a
// provider without an init is refused naming both.
func TestProvider(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	for _, c := range []struct {
		args     []string
		provider string
		init     bool
	}{
		{nil, "contained", true},
		{[]string{"--provider", "auto"}, "contained", true},
		{[]string{"--provider", "contained"}, "contained", true},
		{[]string{"--provider", "local"}, "local", false},
		{[]string{"--provider", "local", "--containment", "off"}, "local", false},
		{[]string{"--provider", "local", "--containment", "auto"}, "local", false},
		{[]string{"--provider", "contained", "--containment", "require"}, "contained", true},
		{[]string{"--provider", "auto", "--containment", "off"}, "local", false},
	} {
		args := append(append([]string{"run", "--log-level", "info"}, c.args...), "--", pid1)
		stdout, stderr, code := testutil.RunConch(t, marker, args...)
		if code != 0 {
			t.Errorf("%q: exit %d, stderr %q", c.args, code, stderr)
			continue
		}
		if got := strings.HasSuffix(stdout, " __init \n"); got != c.init {
			t.Errorf("%q: pid 1 is %q; want an init of conch: %v", c.args, stdout, c.init)
		}
		if !strings.Contains(stderr, `msg="conch run" version=dev provider=`+c.provider+" ") {
			t.Errorf("%q: the start-up line does not name provider %s:\n%s", c.args, c.provider, stderr)
		}
	}
	for provider, containment := range map[string]string{"local": "none (off; this host would allow: ", "contained": "pid-namespace"} {
		stdout, stderr, _ := testutil.RunConch(t, marker, "doctor", "--provider", provider)
		if !strings.HasPrefix(stdout, "provider: "+provider+"\n") || !strings.Contains(stdout, "\ncontainment: "+containment) {
			t.Errorf("conch doctor --provider %s:\n%s%s", provider, stdout, stderr)
		}
	}

	off := writeConfig(t, "[containment]\nmode = \"off\"\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--provider", "local", "--containment", "require", "--", "true"},
			"conch run: --provider local contradicts --containment require (--provider local is --containment off)\n"},
		{[]string{"run", "--provider", "contained", "--containment", "off", "--", "true"},
			"conch run: --provider contained contradicts --containment off (--provider contained is --containment require)\n"},
		{[]string{"run", "--config", off, "--provider", "contained", "--", "true"},
			"conch run: --provider contained contradicts --containment off (--provider contained is --containment require)\n"},
		{[]string{"doctor", "--provider", "local", "--containment", "require"},
			"conch doctor: --provider local contradicts --containment require (--provider local is --containment off)\n"},
		// What only an init enforces, asked of a provider without one,
		// is refused rather than given an init the user said not to run.
		{[]string{"run", "--provider", "local", "--sandbox", "read-only", "--", "true"},
			"conch run: --provider local runs commands without an init, which --sandbox read-only needs\n"},
		{[]string{"run", "--provider", "local", "--network", "off", "--", "true"},
			"conch run: --provider local runs commands without an init, which --network off needs\n"},
		{[]string{"run", "--containment", "off", "--max-pids", "50", "--", "true"},
			"conch run: --containment off runs commands without an init, which --max-pids 50 needs\n"},
		{[]string{"run", "--config", off, "--max-memory", "1000000", "--", "true"},
			"conch run: --containment off runs commands without an init, which --max-memory 1000000 needs\n"},
		{[]string{"run", "--provider", "remote", "--", "true"},
			"invalid value \"remote\" for flag -provider: must be one of: auto, local, contained\n"},
	} {
		stdout, stderr, code := testutil.RunConch(t, marker, c.args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout, stderr, c.want)
		}
	}

	// conch doctor reports the refusal as the executor's cause.
	stdout, stderr, code := testutil.RunConch(t, marker, "doctor", "--provider", "local", "--sandbox", "workspace-write")
	if want := "\ncontainment: none (--provider local runs commands without an init, which --sandbox workspace-write needs)\n"; code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("conch doctor --provider local --sandbox workspace-write: exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}

	// Where the host allows no init, contained refuses to start as
	// require does; auto runs the command without one.
	wrap := withoutUserNS(t)
	_, stderr, code = runWrapped(t, marker, wrap, "run", "--provider", "contained", "--", "true")
	if want := "conch run: containment unavailable: user namespaces are disabled (user.max_user_namespaces = 0): "; code != 2 || !strings.HasPrefix(stderr, want) {
		t.Errorf("contained without user namespaces: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
	stdout, stderr, code = runWrapped(t, marker, wrap, "run", "--log-level", "info", "--", pid1)
	if code != 0 || strings.HasSuffix(stdout, " __init \n") || !strings.Contains(stderr, " provider=local ") {
		t.Errorf("auto without user namespaces: exit %d, stdout %q, stderr %q; want the local provider", code, stdout, stderr)
	}
}

// TestServeProvider: conch serve's commands run in an init of conch's
// under --provider contained and without one under --provider local, as
// an MCP client sees them.
func TestServeProvider(t *testing.T) {
	t.Parallel()
	for provider, init := range map[string]bool{"local": false, "contained": true} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			cs, _ := startStdio(t, serverOptions{marker: testutil.Marker(t), args: []string{"--provider", provider}})
			got := text(t, callTool(t, cs, "bash", bash(pid1)))
			if got == "" || strings.Contains(got, "[exit code") || strings.HasSuffix(got, " __init ") != init {
				t.Errorf("pid 1 under --provider %s: %q; want an init of conch: %v", provider, got, init)
			}
		})
	}
}
