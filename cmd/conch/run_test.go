//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestRunGolden pins what conch run prints and its exit status. Each
// case's golden file (testdata/run/<name>.golden) is the stdout, then a
// line "-- exit <status> --". Run with -update to rewrite them.
func TestRunGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"text_echo", []string{"--", "echo", "hello"}},
		{"text_words_joined", []string{"echo", "a", "b"}},
		{"text_streams_exit", []string{"--", "echo out; echo err >&2; exit 3"}},
		{"text_no_output", []string{"--", "true"}},
		{"text_timeout", []string{"--timeout-ms", "200", "--", "sleep 5"}},
		{"text_trapped_timeout", []string{"--timeout-ms", "200", "--", "trap 'exit 0' TERM; sleep 5 & wait"}},
		{"text_signal", []string{"--", "kill -TERM $$"}},
		{"text_workdir", []string{"--cwd", "/", "--workdir", "usr", "--", "pwd"}},
		{"text_workdir_missing", []string{"--workdir", "/nonexistent/dir", "--", "true"}},
		{"text_no_trailing_newline", []string{"--", "printf abc"}},
		{"json_echo", []string{"--json", "--", "echo hi"}},
		{"json_exit", []string{"--json", "--", "echo bye; exit 7"}},
		{"json_error", []string{"--json", "--workdir", "/nonexistent/dir", "--", "true"}},
		{"present_echo", []string{"--present", "--", "echo hi"}},
		{"present_exit", []string{"--present", "--workdir", "/", "--", "echo bye; exit 7"}},
		{"present_signal", []string{"--present", "--", "kill -KILL $$"}},
		{"present_error", []string{"--present", "--workdir", "/nonexistent/dir", "--", "true"}},
		{"present_background", []string{"--present", "--background", "--", "echo a; exit 4"}},
		{"background", []string{"--background", "--", "echo a; sleep 0.3; echo b"}},
		{"background_no_newline", []string{"--background", "--", "printf a"}},
		{"background_exit", []string{"--background", "--", "echo x >&2; exit 5"}},
		{"background_signal", []string{"--background", "--", "kill -KILL $$"}},
		{"background_json", []string{"--background", "--json", "--", "echo a; exit 6"}},
		{"yield", []string{"--yield-ms", "300", "--", "echo a; sleep 1; echo b"}},
		{"max_result_bytes", []string{"--max-result-bytes", "1000", "--", "seq 1 1000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			stdout, stderr, code := testutil.RunConch(t, marker, append([]string{"run"}, c.args...)...)
			got := stdout + "-- exit " + strconv.Itoa(code) + " --\n"
			path := filepath.Join("testdata", "run", c.name+".golden")
			testutil.Golden(t, path, got)
			if t.Failed() {
				t.Logf("conch run %q: stderr %s", c.args, stderr)
			}
		})
	}
}

// TestRunUsage covers conch run's refusals and its help.
func TestRunUsage(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	for _, c := range []struct {
		args      []string
		code      int
		out, errs string
	}{
		{[]string{"--help"}, 0, "Exit status:", ""},
		{nil, 2, "", "conch run: no command"},
		{[]string{"--"}, 2, "", "conch run: no command"},
		{[]string{"--json", "--present", "--", "true"}, 2, "", "--json and --present cannot be combined"},
		{[]string{"--timeout-ms", "abc", "--", "true"}, 2, "", `invalid value "abc" for flag -timeout-ms: must be a positive finite number`},
		{[]string{"--grace-ms", "Inf", "--", "true"}, 2, "", `invalid value "Inf" for flag -grace-ms`},
		{[]string{"--cwd", "/nonexistent/dir", "--", "true"}, 2, "", "--cwd /nonexistent/dir: not a directory"},
	} {
		stdout, stderr, code := testutil.RunConch(t, marker, append([]string{"run"}, c.args...)...)
		if code != c.code || !strings.Contains(stdout, c.out) || !strings.Contains(stderr, c.errs) {
			t.Errorf("run %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, %q in stdout, %q in stderr",
				c.args, code, stdout, stderr, c.code, c.out, c.errs)
		}
	}
}

// TestRunInterrupted: SIGINT or SIGHUP kills the command's group and
// exits 130; nothing the command started survives, not even an escapee.
func TestRunInterrupted(t *testing.T) {
	for _, c := range []struct {
		bg  bool
		sig syscall.Signal
	}{{false, syscall.SIGINT}, {true, syscall.SIGINT}, {false, syscall.SIGHUP}, {true, syscall.SIGHUP}} {
		bg := c.bg
		t.Run(fmt.Sprintf("background=%v/%v", bg, unix.SignalName(c.sig)), func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			args := []string{"run"}
			if bg {
				args = append(args, "--background")
			}
			args = append(args, "--", "setsid sleep 1004 >/dev/null 2>&1 & echo started; sleep 1005")
			cmd := exec.Command(testutil.ConchBinary(t), args...)
			cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitProcess(t, marker, cmd.Process.Pid, "sleep 1005")
			waitProcess(t, marker, cmd.Process.Pid, "sleep 1004")
			start := time.Now()
			cmd.Process.Signal(c.sig)
			cmd.Wait()
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("exit took %v", d)
			}
			if code := cmd.ProcessState.ExitCode(); code != 130 {
				t.Errorf("exit %d, want 130", code)
			}
			want := "Error: tool call aborted\n"
			if bg {
				want = "started background task bash-1\nstarted\n"
			}
			if out.String() != want {
				t.Errorf("stdout %q, want %q", out.String(), want)
			}
		})
	}
}

// TestRunStdoutClosed: a reader that goes away (conch run … | head -2)
// ends the follow with 141, as SIGPIPE would, and nothing survives.
func TestRunStdoutClosed(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "run", "--background", "--",
		"setsid sleep 1022 >/dev/null 2>&1 & while :; do echo y; sleep 0.05; done")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	for _, want := range []string{"started background task bash-1\n", "y\n"} {
		if got, err := lines.ReadString('\n'); got != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	}
	waitProcess(t, marker, cmd.Process.Pid, "sleep 1022")
	stdout.Close()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 141 {
		t.Errorf("exit %d, want 141", code)
	}
}

// TestRunInterruptedFollowsToTheEnd: an interrupted --background follow
// kills the task and shows everything it printed up to its end, what it
// printed while dying included: the last read comes after the task has
// settled, not before the kill (which also lost output still in the pipe
// when the read came early).
func TestRunInterruptedFollowsToTheEnd(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "run", "--background", "--", "trap 'echo bye; exit 0' TERM; echo started; sleep 1040 & wait")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitProcess(t, marker, cmd.Process.Pid, "sleep 1040")
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("exit took %v", d)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	if want := "started background task bash-1\nstarted\nbye\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
}

// BenchmarkRunTrue runs the whole of `conch run -- true` (start, one
// command, exit) on the defaults (contained, workspace-write sandbox) and
// with --containment off, interleaved, and reports each median and their
// ratio.
//
//	go test -run '^$' -bench RunTrue -benchtime 40x ./cmd/conch/
func BenchmarkRunTrue(b *testing.B) {
	variants := []struct {
		name string
		args []string
	}{{"defaults", []string{"run", "--", "true"}}, {"off", []string{"run", "--containment", "off", "--", "true"}}}
	times := make([][]time.Duration, len(variants))
	marker := testutil.Marker(b)
	for b.Loop() {
		for k, v := range variants {
			cmd := testutil.Conch(b, marker, v.args...)
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("conch %v: %v\n%s", v.args, err, out)
			}
			times[k] = append(times[k], time.Since(t0))
		}
	}
	med := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	on, off := med(times[0]), med(times[1])
	b.ReportMetric(float64(on.Microseconds())/1000, "defaults-ms")
	b.ReportMetric(float64(off.Microseconds())/1000, "off-ms")
	b.ReportMetric(float64(on)/float64(off), "ratio")
}

// TestRunInitAheadClosed: conch run starts its session's init while it
// starts (package prestart), before it has read its configuration file.
// When that file turns containment off, the init is ended once the stack
// is built: the command, which runs on the host, finds no idle init
// among conch's children.
func TestRunInitAheadClosed(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "conch", "config.toml"), "[containment]\nmode = \"off\"\n")
	cmd := testutil.Conch(t, marker, "run", "--", "ps -o args= --ppid $PPID")
	cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+cfg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conch run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ps -o args=") || strings.Contains(string(out), "__init") {
		t.Errorf("conch's children, as the command saw them:\n%s\nwant the command's shell alone, no init", out)
	}
}

// TestRunLeavesTerminal: conch run started from a terminal (its session
// has a controlling terminal, the user's) runs the contained command,
// and a background process the command leaves, where /dev/tty opens for
// neither: the init shares the server's session and leaves its terminal
// as it starts (docs/containment.md#spawning-and-waiting). The premise
// is checked first: under that terminal, /dev/tty opens for a shell.
func TestRunLeavesTerminal(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	const probe = `if (: </dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi`
	inTerminal := func(cmd *exec.Cmd) string {
		t.Helper()
		cmd.Stdin = slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := inTerminal(exec.Command("bash", "-c", probe)); got != "tty" {
		t.Fatalf("a shell under the terminal: %q, want tty (the test's premise)", got)
	}
	for _, containment := range []string{"require", "off"} {
		got := inTerminal(testutil.Conch(t, marker, "run", "--containment", containment, "--", probe+"; ("+probe+") &\nwait"))
		if got != "no-tty\nno-tty" {
			t.Errorf("--containment %s: the command and its background process printed %q, want no-tty twice", containment, got)
		}
	}
}
