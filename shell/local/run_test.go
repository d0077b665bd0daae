//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

func TestEchoAndExitCodes(t *testing.T) {
	ex, _ := newExec(t, nil)
	for _, tc := range []struct {
		cmd            string
		stdout, stderr string
		code           int
	}{
		{"echo hello", "hello\n", "", 0},
		{"true", "", "", 0},
		{"exit 3", "", "", 3},
		{"echo out; echo err >&2; exit 7", "out\n", "err\n", 7},
		{"printf 'no newline'", "no newline", "", 0},
		{"exit 255", "", "", 255},
	} {
		r := run(t, ex, shell.Request{Command: tc.cmd})
		if r.Stdout.Text != tc.stdout || r.Stderr.Text != tc.stderr || code(r) != tc.code {
			t.Errorf("%q: got stdout %q stderr %q code %d; want %q %q %d", tc.cmd, r.Stdout.Text, r.Stderr.Text, code(r), tc.stdout, tc.stderr, tc.code)
		}
		if r.Signal != "" || r.TimedOut || r.Aborted || r.Stdout.Truncated {
			t.Errorf("%q: unexpected %+v", tc.cmd, r)
		}
	}
}

func TestCwdDefaultAndOverride(t *testing.T) {
	base := t.TempDir()
	sub := filepath.Join(base, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExec(t, &local.Options{Cwd: base})
	if got := run(t, ex, shell.Request{Command: "pwd -P"}).Stdout.Text; got != base+"\n" {
		t.Errorf("default cwd: %q, want %q", got, base)
	}
	if got := run(t, ex, shell.Request{Command: "pwd -P", Workdir: sub}).Stdout.Text; got != sub+"\n" {
		t.Errorf("absolute workdir: %q", got)
	}
	if got := run(t, ex, shell.Request{Command: "pwd -P", Workdir: "sub"}).Stdout.Text; got != sub+"\n" {
		t.Errorf("relative workdir: %q", got)
	}
}

func TestMissingWorkdirIsInfrastructureError(t *testing.T) {
	ex, _ := newExec(t, nil)
	missing := filepath.Join(t.TempDir(), "nope")
	spec, err := ex.Resolve(shell.Request{Command: "true", Workdir: missing})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Run(context.Background(), spec)
	var we *shell.WorkdirError
	if !errors.As(err, &we) || we.Path != missing || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Run: err %v, want a WorkdirError naming %s", err, missing)
	}
	if _, err := ex.Start(spec); !errors.As(err, &we) {
		t.Fatalf("Start: err %v, want a WorkdirError", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	spec, _ = ex.Resolve(shell.Request{Command: "true", Workdir: file})
	if _, err := ex.Run(context.Background(), spec); !errors.As(err, &we) || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("file as workdir: %v", err)
	}
}

func TestResolveRefusesBadRequests(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Timeout: time.Second, MaxTimeout: 5 * time.Second})
	for _, r := range []shell.Request{
		{Command: ""},
		{Command: "  \n\t"},
		{Command: "true", Timeout: -1},
		{Command: "true", StdoutMaxBytes: -5},
	} {
		_, err := ex.Resolve(r)
		var re *shell.RequestError
		if !errors.As(err, &re) {
			t.Errorf("Resolve(%+v) = %v, want a RequestError", r, err)
		}
	}
	s, _ := ex.Resolve(shell.Request{Command: "true"})
	if s.Timeout != time.Second {
		t.Errorf("default timeout %v", s.Timeout)
	}
	s, _ = ex.Resolve(shell.Request{Command: "true", Timeout: time.Hour})
	if s.Timeout != 5*time.Second {
		t.Errorf("clamped timeout %v, want 5s", s.Timeout)
	}
	if s.Stdin != nil || s.Env != nil || s.StdoutMaxBytes != 0 {
		t.Errorf("absent fields got stand-ins: %+v", s)
	}
}

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

func TestTimeoutClampedAndReported(t *testing.T) {
	ex, _ := newExec(t, &local.Options{MaxTimeout: 200 * time.Millisecond})
	t0 := time.Now()
	r := run(t, ex, shell.Request{Command: "sleep 30", Timeout: time.Hour})
	if !r.TimedOut || r.Aborted || r.Timeout != 200*time.Millisecond || r.Signal != "SIGTERM" || r.ExitCode != nil {
		t.Fatalf("result %+v", r)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestTimeoutCancelSelfSignal(t *testing.T) {
	ex, _ := newExec(t, nil)
	r := run(t, ex, shell.Request{Command: "sleep 30", Timeout: 100 * time.Millisecond})
	if !r.TimedOut || r.Aborted || r.Signal != "SIGTERM" {
		t.Errorf("timeout: %+v", r)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	r = runCtx(t, ctx, ex, shell.Request{Command: "sleep 30", Timeout: 10 * time.Second})
	if r.TimedOut || !r.Aborted || r.Signal != "SIGTERM" {
		t.Errorf("cancel: %+v", r)
	}

	r = run(t, ex, shell.Request{Command: "kill -TERM $$", Timeout: 10 * time.Second})
	if r.TimedOut || r.Aborted || r.Signal != "SIGTERM" || r.ExitCode != nil {
		t.Errorf("self-signal: %+v", r)
	}

	// A cancellation after the timeout fired does not change the cause.
	// The cancellation follows the timeout's SIGTERM, which the trap
	// records, not a delay: the timeout runs from the spawn, which may
	// take longer than any delay on a loaded machine.
	termed := filepath.Join(t.TempDir(), "termed")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	canceled := make(chan struct{})
	go func() {
		defer close(canceled)
		defer cancel()
		for range 1000 {
			if _, err := os.Stat(termed); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	r = runCtx(t, ctx, ex, shell.Request{Command: "trap 'touch " + termed + "' TERM; while :; do sleep 0.1; done", Timeout: 100 * time.Millisecond})
	<-canceled
	if !r.TimedOut || r.Aborted || r.Signal != "SIGKILL" {
		t.Errorf("first cause: %+v", r)
	}
}

func TestAbortedBeforeSpawn(t *testing.T) {
	ex, _ := newExec(t, nil)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec, _ := ex.Resolve(shell.Request{Command: "touch spawned", Workdir: dir})
	_, err := ex.Run(ctx, spec)
	if !errors.Is(err, shell.ErrAbortedBeforeSpawn) || err.Error() != "aborted before spawn: context canceled" {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "spawned")); err == nil {
		t.Fatal("the command ran")
	}
}

func TestTermTrapIsKilledAfterGrace(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 300 * time.Millisecond})
	t0 := time.Now()
	r := run(t, ex, shell.Request{Command: "trap '' TERM; sleep 30", Timeout: 100 * time.Millisecond})
	d := time.Since(t0)
	if !r.TimedOut || r.Signal != "SIGKILL" {
		t.Fatalf("result %+v", r)
	}
	if d < 400*time.Millisecond || d > 2*time.Second {
		t.Errorf("took %v, want about timeout + grace (400ms)", d)
	}
}

func TestTrappedTermExitZeroIsTimedOut(t *testing.T) {
	ex, _ := newExec(t, nil)
	r := run(t, ex, shell.Request{Command: "trap 'exit 0' TERM; sleep 30 & wait", Timeout: 100 * time.Millisecond})
	if !r.TimedOut || code(r) != 0 || r.Signal != "" {
		t.Fatalf("result %+v", r)
	}
}

func TestStdin(t *testing.T) {
	ex, _ := newExec(t, nil)
	r := run(t, ex, shell.Request{Command: "test -c /dev/stdin && echo devnull; cat"})
	if r.Stdout.Text != "devnull\n" {
		t.Errorf("absent stdin: %q", r.Stdout.Text)
	}
	r = run(t, ex, shell.Request{Command: "test -c /dev/stdin || echo pipe; cat", Stdin: []byte("given\n")})
	if r.Stdout.Text != "pipe\ngiven\n" {
		t.Errorf("given stdin: %q", r.Stdout.Text)
	}
	r = run(t, ex, shell.Request{Command: "cat; echo end", Stdin: []byte{}})
	if r.Stdout.Text != "end\n" {
		t.Errorf("empty stdin: %q", r.Stdout.Text)
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	t0 := time.Now()
	r = run(t, ex, shell.Request{Command: "echo quit", Stdin: big, Timeout: 10 * time.Second})
	if r.Stdout.Text != "quit\n" || code(r) != 0 || time.Since(t0) > 3*time.Second {
		t.Errorf("1 MiB stdin to a command that exits at once: %+v in %v", r, time.Since(t0))
	}
	r = run(t, ex, shell.Request{Command: "wc -c", Stdin: big})
	if strings.TrimSpace(r.Stdout.Text) != "1048576" {
		t.Errorf("1 MiB stdin read whole: %q", r.Stdout.Text)
	}
}

func TestEnvironmentScrubAndOrder(t *testing.T) {
	// Without the server's own PYTHONUNBUFFERED, to see the default's.
	environ := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PYTHONUNBUFFERED=") })
	environ = append(environ,
		"MY_API_KEY=k", "GITHUB_TOKEN=t", "DB_PASSWORD=p", "X_SECRET=s", "CONCH_STALE=1",
		"BASH_ENV=/etc/profile", "ENV=/etc/profile", "SSH_PASSPHRASE=x", "AWS_CREDENTIALS=x",
		"BASH_FUNC_evil%%=() { echo pwned; }", "KEEP_ME=yes", "TERM=xterm-256color", "PAGER=less",
		// Each of these reached commands before the scrub was widened.
		"DATABASE_URL=postgres://u:pw@h/db", "REDIS_URL=redis://:hunter2@cache:6379/0", "NPM_CONFIG__AUTH=dTpw",
		"MYSQL_PWD=pw", "PGPASS=pw", "HF_AUTH=x", "SENTRY_DSN=https://k@o1.ingest.sentry.io/1",
		"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T/B/x", "DOCKER_AUTH_CONFIG={}", "JWT=e30.e30.x",
		"SESSION_COOKIE=c", "SHELLOPTS=xtrace", "PS4=$(echo pwned >&2)",
		"GIT_AUTHOR_NAME=A U Thor", "OLDPWD=/", "PASSED_TOKEN=through",
	)
	ex, _ := newExec(t, &local.Options{Environ: environ, PassEnv: []string{"PASSED_TOKEN"}})
	r := run(t, ex, shell.Request{
		Command: "env",
		Env:     map[string]string{"EXPLICIT_TOKEN": "kept", "PAGER": "more", "CONCH_SHELL": "model"},
		ManagedEnv: map[string]string{
			"CONCH_SHELL": "1", "CONCH_SESSION_ID": "s1", "CONCH_HOME": "/state",
		},
	})
	env := map[string]string{}
	for _, line := range strings.Split(r.Stdout.Text, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for _, gone := range []string{"MY_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "X_SECRET", "CONCH_STALE", "BASH_ENV", "ENV", "SSH_PASSPHRASE", "AWS_CREDENTIALS", "BASH_FUNC_evil%%",
		"DATABASE_URL", "REDIS_URL", "NPM_CONFIG__AUTH", "MYSQL_PWD", "PGPASS", "HF_AUTH", "SENTRY_DSN", "SLACK_WEBHOOK_URL",
		"DOCKER_AUTH_CONFIG", "JWT", "SESSION_COOKIE", "SHELLOPTS", "PS4"} {
		if _, ok := env[gone]; ok {
			t.Errorf("%s reached the command", gone)
		}
	}
	want := map[string]string{
		"KEEP_ME": "yes", "EXPLICIT_TOKEN": "kept", "PASSED_TOKEN": "through", "GIT_AUTHOR_NAME": "A U Thor", "OLDPWD": "/",
		"PYTHONUNBUFFERED": "1",
		"TERM":             "dumb", "NO_COLOR": "1", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true",
		"EDITOR": "true", "VISUAL": "true", "GH_PAGER": "cat", "MANPAGER": "cat", "DEBIAN_FRONTEND": "noninteractive",
		"PAGER":            "more", // Env beats the defaults
		"CONCH_SHELL":      "1",    // the managed overlay beats Env
		"CONCH_SESSION_ID": "s1", "CONCH_HOME": "/state",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if r := run(t, ex, shell.Request{Command: "type evil 2>&1 || echo nofunc"}); !strings.Contains(r.Stdout.Text, "nofunc") {
		t.Errorf("exported function reached bash: %q", r.Stdout.Text)
	}
	if strings.Contains(r.Stderr.Text, "pwned") || strings.Contains(r.Stderr.Text, "+ env") {
		t.Errorf("SHELLOPTS/PS4 ran code before the command: %q", r.Stderr.Text)
	}
	// The names (never the values) of what was dropped, for the log.
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

// TestPythonOutputWhileRunning: a background Python program's output is
// readable while it runs, not held in its buffer until it exits (its
// stdout is a pipe, which Python would otherwise buffer in blocks).
func TestPythonOutputWhileRunning(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed for this test")
	}
	environ := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PYTHONUNBUFFERED=") })
	ex, _ := newExec(t, &local.Options{Environ: environ})
	p := start(t, ex, shell.Request{Command: `python3 -c 'import time; print("x"); time.sleep(30)'`})
	defer func() {
		p.Kill()
		waitDone(t, p, 10*time.Second)
	}()
	// Unbuffered, Python writes "x" and "\n" separately: wait for the line.
	if r := readUntil(t, p, func(r shell.ReadResult) bool { return strings.Contains(r.Stdout, "\n") }); r.Stdout != "x\n" {
		t.Errorf("read %q", r.Stdout)
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

func TestBackgroundGrandchildDoesNotHang(t *testing.T) {
	ex, marker := newExec(t, &local.Options{Grace: 500 * time.Millisecond})
	t0 := time.Now()
	r := run(t, ex, shell.Request{Command: "sleep 600 & echo ok"})
	d := time.Since(t0)
	if r.Stdout.Text != "ok\n" || code(r) != 0 {
		t.Errorf("result %+v", r)
	}
	if d > 500*time.Millisecond+time.Second {
		t.Errorf("returned after %v, want within grace + 1s", d)
	}
	_ = marker // Close (cleanup) must kill the sleep left in the group.
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
	setup := `git init -q . && git config user.email t@example.com && git config user.name t &&
for i in $(seq 1 300); do echo $i > f; git add f; git commit -qm "commit $i"; done`
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
