//go:build linux

package local_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

func TestNewRefusesBadSettings(t *testing.T) {
	for field, o := range map[string]local.Options{
		"Timeout":        {Timeout: -1},
		"MaxTimeout":     {MaxTimeout: -1},
		"MaxOutputBytes": {MaxOutputBytes: -1},
		"MaxSpillBytes":  {MaxSpillBytes: -1},
		"Grace":          {Grace: -time.Second},
		"SpillBudget":    {SpillBudget: -1},
	} {
		_, err := local.New(&o)
		if err == nil || err.Error() != field+" must be a positive finite number" {
			t.Errorf("%s: err %v", field, err)
		}
	}
}

// TestExecutorMakesProcessNonDumpable: once an executor exists, its
// commands (same user) cannot read the process's memory or environment
// through /proc, and running commands does not undo it.
func TestExecutorMakesProcessNonDumpable(t *testing.T) {
	ex, _ := newExec(t, nil)
	run(t, ex, shell.Request{Command: "true"})
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || d != 0 {
		t.Errorf("PR_GET_DUMPABLE = %d, %v; want 0", d, err)
	}
}

func TestEscapeesDieAtClose(t *testing.T) {
	ex, marker := newExec(t, nil)
	for _, cmd := range []string{
		"setsid sleep 1000 & echo setsid",
		"( ( sleep 1001 & ) & ) ; echo doublefork",
		"nohup sleep 1002 >/dev/null 2>&1 & disown; echo nohup",
		"setsid bash -c 'sleep 1003 & sleep 1004' & echo nested",
	} {
		r := run(t, ex, shell.Request{Command: cmd, Timeout: 5 * time.Second})
		if code(r) != 0 {
			t.Fatalf("%q: %+v", cmd, r)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, marker)
}

func TestNoPagerNoPromptNoHang(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed for this test")
	}
	ex, _ := newExec(t, nil)
	repo := t.TempDir()
	// 300 commits, more than a screen of log, made by one git process
	// (fast-import): three git processes per commit took 50 s at load 20.
	setup := `git init -q . && git config user.email t@example.com && git config user.name t &&
git symbolic-ref HEAD refs/heads/main &&
for i in $(seq 1 300); do printf 'commit refs/heads/main\ncommitter t <t@example.com> %d +0000\ndata <<EOF\ncommit %d\nEOF\nM 644 inline f\ndata <<EOF\n%d\nEOF\n\n' $((1700000000 + i)) $i $i; done |
git fast-import --quiet && git reset -q --hard`
	if r := run(t, ex, shell.Request{Command: setup, Workdir: repo, Timeout: 60 * time.Second}); code(r) != 0 {
		t.Fatalf("setup: %+v", r)
	}
	for _, tc := range []struct {
		cmd      string
		wantZero bool
	}{
		{"git log", true},
		{"echo change > f; git add f; git commit", false}, // no -m: the editor is `true`, the message empty
		{"read x", false},
	} {
		t0 := time.Now()
		r := run(t, ex, shell.Request{Command: tc.cmd, Workdir: repo, Timeout: 10 * time.Second})
		if r.TimedOut || time.Since(t0) > 5*time.Second {
			t.Errorf("%q hung: %+v", tc.cmd, r)
		}
		if (code(r) == 0) != tc.wantZero {
			t.Errorf("%q: exit %d", tc.cmd, code(r))
		}
	}
	r := run(t, ex, shell.Request{Command: "git log --oneline | wc -l", Workdir: repo})
	if strings.TrimSpace(r.Stdout.Text) != "300" {
		t.Errorf("git log lines: %q", r.Stdout.Text)
	}
}

// Scrubbed names (never the values of) what the scrub dropped, for the log.
func TestScrubbedNamesWhatWasDropped(t *testing.T) {
	environ := append(os.Environ(), "DATABASE_URL=postgres://u:pw@h/db", "PS4=$(echo pwned >&2)",
		"SHELLOPTS=xtrace", "MY_API_KEY=k", "KEEP_ME=yes", "PASSED_TOKEN=through")
	ex, _ := newExec(t, &local.Options{Environ: environ, PassEnv: []string{"PASSED_TOKEN"}})
	scrubbed := ex.Scrubbed()
	for _, name := range []string{"DATABASE_URL", "PS4", "SHELLOPTS", "MY_API_KEY"} {
		if !slices.Contains(scrubbed, name) {
			t.Errorf("Scrubbed() %q lacks %s", scrubbed, name)
		}
	}
	if slices.Contains(scrubbed, "PASSED_TOKEN") || slices.Contains(scrubbed, "KEEP_ME") {
		t.Errorf("Scrubbed() %q names a variable that was kept", scrubbed)
	}
}
