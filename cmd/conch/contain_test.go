//go:build linux

package main

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"fmt"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// withoutUserNS runs cmd in a user namespace of its own whose
// user.max_user_namespaces is 0 (the setting counts per user namespace),
// so conch cannot create the namespaces of an init there: a host that
// does not allow containment, made without touching the machine's
// setting.
func withoutUserNS(t *testing.T) func(*exec.Cmd) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare not installed")
	}
	return func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"unshare", "-U", "-r", "sh", "-c", `echo 0 >/proc/sys/user/max_user_namespaces && exec "$0" "$@"`, cmd.Path}, cmd.Args[1:]...)
		cmd.Path = unshare
	}
}

// runWrapped is testutil.RunConch with the command run under wrap.
func runWrapped(t *testing.T, marker string, wrap func(*exec.Cmd), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := testutil.Conch(t, marker, args...)
	wrap(cmd)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("conch %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestRunContained: with --containment require a command sees only the
// processes of its namespace (the init as pid 1, not the server), keeps
// the user id of the server, and does not inherit the init's runtime
// settings (a Go program run with GOGC=off would never collect).
func TestRunContained(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	out, errOut, code := testutil.RunConch(t, marker, "run", "--containment", "require", "--",
		`id -u; echo "${GOGC-unset} ${GOMAXPROCS-unset}"; for p in /proc/[0-9]*; do echo "${p#/proc/}: $(tr '\0' ' ' <$p/cmdline)"; done`)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != strconv.Itoa(os.Getuid()) {
		t.Errorf("id -u inside: %s, want %d", lines[0], os.Getuid())
	}
	if len(lines) < 2 || lines[1] != "unset unset" {
		t.Fatalf("GOGC and GOMAXPROCS inside: %q, want both unset\n%s", lines[1:2], out)
	}
	procs := lines[2:]
	if len(procs) == 0 || len(procs) > 4 || !strings.HasPrefix(procs[0], "1: ") || !strings.HasSuffix(procs[0], " __init ") {
		t.Fatalf("the namespace's processes, want the init as 1 and the command's own:\n%s", strings.Join(procs, "\n"))
	}
	for _, p := range procs {
		if strings.Contains(p, "--containment") {
			t.Errorf("the server is visible to its command: %s", p)
		}
	}
}

// TestContainmentUnavailable: where the host allows no init, require
// refuses to start naming the cause (exit 2), auto runs the command
// without containment and logs the cause once, and doctor exits 1 for
// require.
func TestContainmentUnavailable(t *testing.T) {
	t.Parallel()
	wrap := withoutUserNS(t)
	const cause = "user namespaces are disabled (user.max_user_namespaces = 0)"
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)

	out, errOut, code := runWrapped(t, marker, wrap, "run", "--containment", "require", "--", "echo ran")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "conch run: containment unavailable: "+cause+": ") {
		t.Errorf("require: exit %d, stdout %q, stderr %q; want exit 2 naming the cause", code, out, errOut)
	}
	out, errOut, code = runWrapped(t, marker, wrap, "run", "--sandbox", "read-only", "--", "echo ran")
	if code != 2 || !strings.Contains(errOut, cause) {
		t.Errorf("--sandbox read-only: exit %d, stderr %q; want exit 2 naming the cause", code, errOut)
	}
	out, errOut, code = runWrapped(t, marker, wrap, "run", "--containment", "auto", "--log-level", "info", "--", "echo ran")
	if code != 0 || out != "ran\n" {
		t.Errorf("auto: exit %d, stdout %q, want 0 and the command's output", code, out)
	}
	if n := strings.Count(errOut, "containment unavailable: commands run without it"); n != 1 || !strings.Contains(errOut, cause) {
		t.Errorf("auto: the cause logged %d times, want once naming %q:\n%s", n, cause, errOut)
	}
	if !strings.Contains(errOut, `containment: none (`+cause) {
		t.Errorf("auto: the start-up line does not say containment is none:\n%s", errOut)
	}

	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config", "conch", "config.toml"), "[containment]\nmode = \"require\"\n")
	lines, code := runDoctorCmd(t, home, false, wrap)
	if code != 1 {
		t.Errorf("doctor with containment.mode = require: exit %d, want 1", code)
	}
	if got := lines["containment"]; len(got) != 1 || !strings.Contains(got[0], cause) {
		t.Errorf("doctor containment line %q, want the cause", got)
	}
}

// TestDoctorContainment: configured in the file, containment and the
// sandbox are reported as the executor enforces them, as root and as an
// unprivileged user.
func TestDoctorContainment(t *testing.T) {
	t.Parallel()
	home := doctorHome(t)
	writeFile(t, filepath.Join(home, ".config", "conch", "config.toml"),
		"[containment]\nmode = \"require\"\n[sandbox]\nmode = \"workspace-write\"\nnetwork = \"off\"\n")
	for _, nobody := range []bool{false, true} {
		var env []string
		if nobody { // the test's temp dirs are root's
			env = append(env, "TMPDIR="+testutil.UnprivilegedDir(t))
		}
		lines, code := runDoctor(t, home, nobody, env...)
		if code != 0 {
			t.Errorf("nobody=%v: exit %d, want 0", nobody, code)
		}
		if got := lines["containment"]; len(got) != 1 || !strings.HasPrefix(got[0], "pid-namespace") {
			t.Errorf("nobody=%v: containment %q", nobody, got)
		}
		if got := lines["sandbox"]; len(got) != 1 || got[0] != "workspace-write, network off" {
			t.Errorf("nobody=%v: sandbox %q", nobody, got)
		}
	}
}

// TestSandboxDegraded: where the host allows no init, the default
// sandbox degrades: conch run, serve and acp start and run commands
// without it, log the cause once, and the bash description an MCP client
// lists ends with sandbox.DegradedNote (a host that enforces the sandbox
// gets no such note). A restriction given by a flag or a configuration
// key refuses to start, naming the cause.
func TestSandboxDegraded(t *testing.T) {
	t.Parallel()
	wrap := withoutUserNS(t)
	const (
		cause  = "user namespaces are disabled (user.max_user_namespaces = 0)"
		logged = "sandbox unavailable: commands run without a file sandbox"
	)
	checkLog := func(t *testing.T, logs string) {
		t.Helper()
		if n := strings.Count(logs, logged); n != 1 || !strings.Contains(logs, cause) {
			t.Errorf("%q logged %d times, want once with the cause %q:\n%s", logged, n, cause, logs)
		}
	}

	t.Run("run", func(t *testing.T) {
		t.Parallel()
		marker := testutil.Marker(t)
		defer testutil.AssertNoProcesses(t, marker)
		out, errOut, code := runWrapped(t, marker, wrap, "run", "--log-level", "info", "--", "echo ran")
		if code != 0 || out != "ran\n" {
			t.Errorf("the default sandbox: exit %d, stdout %q, stderr %q; want the command run", code, out, errOut)
		}
		checkLog(t, errOut)
		if want := "sandbox: none (workspace-write unavailable: " + cause; !strings.Contains(errOut, want) {
			t.Errorf("the start-up line does not say %q:\n%s", want, errOut)
		}
		cfg := filepath.Join(t.TempDir(), "config.toml")
		writeFile(t, cfg, "[sandbox]\nmode = \"workspace-write\"\n")
		for _, given := range [][]string{{"--sandbox", "workspace-write"}, {"--network", "off"}, {"--config", cfg}} {
			args := append(append([]string{"run"}, given...), "--", "echo ran")
			out, errOut, code := runWrapped(t, marker, wrap, args...)
			if code != 2 || out != "" || !strings.HasPrefix(errOut, "conch run: containment unavailable: "+cause+": ") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming the cause", given, code, out, errOut)
			}
		}
		// Nothing to enforce: full-access given runs.
		if out, errOut, code := runWrapped(t, marker, wrap, "run", "--sandbox", "full-access", "--", "echo ran"); code != 0 || out != "ran\n" {
			t.Errorf("--sandbox full-access: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})

	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		for _, degraded := range []bool{true, false} {
			o := serverOptions{marker: testutil.Marker(t)}
			if degraded {
				o.wrap = wrap
			}
			cs, _ := startStdio(t, o)
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if desc := res.Tools[0].Description; strings.Contains(desc, " "+sandbox.DegradedNote) != degraded {
				t.Errorf("degraded %v: the bash description ends %q", degraded, desc[max(0, len(desc)-120):])
			}
			// The network goes with the containment: the default public
			// policy needs the init, and the description says it is gone.
			const netNote = "The network policy (public) cannot be enforced on this host (no containment): commands reach the host's network as it is, conch's own server port included."
			if desc := res.Tools[0].Description; strings.Contains(desc, netNote) != degraded {
				t.Errorf("degraded %v: the bash description %q; want the network note %v", degraded, desc[max(0, len(desc)-400):], degraded)
			}
			if got := text(t, callTool(t, cs, "bash", bash("echo ran"))); got != "ran\n" {
				t.Errorf("degraded %v: echo ran: %q", degraded, got)
			}
		}
	})

	t.Run("acp", func(t *testing.T) {
		t.Parallel()
		marker := testutil.Marker(t)
		defer testutil.AssertNoProcesses(t, marker)
		cmd := testutil.Conch(t, marker, "acp", "--log-level", "info")
		wrap(cmd)
		logs := &testutil.Buffer{}
		cmd.Stderr = logs
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stream := &testutil.Buffer{}
		acp := newACPScript(t, stdin, io.TeeReader(stdout, stream))
		sid := acp.session(t.TempDir())
		if sid == "" {
			t.Fatalf("no session; logs:\n%s", logs.String())
		}
		acp.prompt(sid, "echo ran-$((40 + 2))")
		stdin.Close()
		io.Copy(io.Discard, stdout)
		if err := cmd.Wait(); err != nil {
			t.Errorf("conch acp: %v\n%s", err, logs.String())
		}
		if !strings.Contains(stream.String(), "ran-42") {
			t.Errorf("the command's output is not on the card:\n%s", stream.String())
		}
		checkLog(t, logs.String())
	})
}

// TestRunSandbox: under --sandbox workspace-write a command writes the
// workspace and /tmp but not the home outside it; with --network off it
// cannot connect to a listener on this machine that it reaches without.
func TestRunSandbox(t *testing.T) {
	t.Parallel()
	// Outside /tmp, which the sandbox leaves writable.
	base, err := os.MkdirTemp("/var/tmp", "conch-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	run := func(args ...string) (string, string, int) {
		cmd := testutil.Conch(t, marker, append([]string{"run", "--cwd", ws}, args...)...)
		cmd.Env = append(cmd.Env, "HOME="+home)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatal(err)
			}
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	tmp := fmt.Sprintf("/tmp/conch-sandbox-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(tmp) })
	// conch run prints the command's stderr after its stdout, marked.
	out, errOut, _ := run("--sandbox", "workspace-write", "--",
		`touch ~/x && echo home; touch ./y && echo ws; touch `+tmp+` && echo tmp`)
	if !strings.HasPrefix(out, "ws\ntmp\n[stderr]\n") || !strings.Contains(out, "touch: cannot touch '"+home+"/x': Permission denied") {
		t.Errorf("workspace-write: stdout %q, stderr %q; want ~/x denied, the workspace and /tmp written", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(home, "x")); err == nil {
		t.Errorf("~/x was written under workspace-write")
	}
	// The sandbox's denial is named in the result, before the exit
	// marker, and in the structured value.
	out, _, _ = run("--sandbox", "workspace-write", "--", "touch ~/x")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	wantMarker := "[sandbox: write to " + home + "/x denied under workspace-write mode; writable: " + ws + ", "
	if n := len(lines); n < 2 || !strings.HasPrefix(lines[n-2], wantMarker) || lines[n-1] != "[exit code: 1]" {
		t.Errorf("touch ~/x under workspace-write:\n%s\nwant the line before the exit marker to start %q", out, wantMarker)
	}
	out, _, _ = run("--json", "--sandbox", "workspace-write", "--", "touch ~/x")
	var v struct {
		Sandbox *struct {
			Mode, Network string
			Denied        []struct{ Path, Op string }
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if sb := v.Sandbox; sb == nil || sb.Mode != "workspace-write" || sb.Network != "public" || len(sb.Denied) != 1 || sb.Denied[0].Path != home+"/x" || sb.Denied[0].Op != "write" {
		t.Errorf("structured sandbox value of touch ~/x: %+v", v.Sandbox)
	}

	connect, _ := tcpConnect(t)
	if out, errOut, _ := run("--network", "on", "--", connect); out != "connected\n" {
		t.Fatalf("network on: stdout %q, stderr %q; want connected", out, errOut)
	}
	// Landlock refuses the connect under the default workspace-write
	// mode; the empty network namespace would under full-access.
	for _, mode := range []string{"workspace-write", "full-access"} {
		out, errOut, _ := run("--sandbox", mode, "--network", "off", "--", connect)
		if strings.Contains(out, "connected") || !strings.Contains(out, "[sandbox: network is off for commands]") {
			t.Errorf("network off, %s: stdout %q, stderr %q; want the connect refused, and the network marker", mode, out, errOut)
		}
	}
}

// writeFile writes text to path, creating its directories, readable by
// every user (for the unprivileged runs).
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestServeContained: conch serve --containment require over stdio, with
// the SDK's client, runs a command and a background task, and task_kill
// ends the task with the escapee it left in a session of its own.
func TestServeContained(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	cs, server := startStdio(t, serverOptions{marker: marker, args: []string{"--containment", "require"}})
	if got := text(t, callTool(t, cs, "bash", bash("cat /proc/1/cmdline | tr '\\0' ' '"))); !strings.HasSuffix(got, " __init ") {
		t.Errorf("pid 1 of the command: %q, want conch's init", got)
	}
	if got := text(t, callTool(t, cs, "bash", bashBG("setsid sleep 1031 >/dev/null 2>&1 & sleep 1032"))); got != "started background task bash-1" {
		t.Fatalf("background: %q", got)
	}
	waitProcess(t, marker, server, "sleep 1031")
	waitProcess(t, marker, server, "sleep 1032")
	if got := text(t, callTool(t, cs, "task_kill", map[string]any{"task_id": "bash-1"})); got != "killed task bash-1 [status: killed, signal: SIGTERM]" {
		t.Errorf("task_kill: %q", got)
	}
	waitNoProcesses(t, marker, server, 5*time.Second)
}

// TestServeContainedKilled: when a contained conch serve is killed with
// SIGKILL, its init dies with it and the kernel ends everything in the
// namespace: a background task and a setsid escapee, as root and as an
// unprivileged user.
func TestServeContainedKilled(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			cmd := testutil.Conch(t, marker, "serve", "--containment", "require")
			if nobody {
				testutil.Unprivileged(t, cmd)
				dir := testutil.UnprivilegedDir(t)
				cmd.Env = append(cmd.Env, "TMPDIR="+dir, "XDG_STATE_HOME="+dir, "HOME="+dir)
			}
			cmd.Stderr = newLogBuffer(t, "conch serve")
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyMCP)
			if err != nil {
				t.Fatalf("connect to conch serve: %v", err)
			}
			defer cs.Close()
			uid := os.Getuid()
			if nobody {
				uid = testutil.UnprivilegedID
			}
			if got := text(t, callTool(t, cs, "bash", bash("id -u"))); got != strconv.Itoa(uid)+"\n" {
				t.Errorf("id -u: %q", got)
			}
			callTool(t, cs, "bash", bashBG("setsid sleep 1033 >/dev/null 2>&1 & sleep 1034"))
			waitProcess(t, marker, cmd.Process.Pid, "sleep 1033")
			waitProcess(t, marker, cmd.Process.Pid, "sleep 1034")
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			waitNoProcesses(t, marker, -1, 5*time.Second)
		})
	}
}

// TestServeContainedTTY: a contained conch serve (by default, or with
// require) offers tty, as one without an init does, and a tty call runs
// inside the init like any command: pid 1 of its /proc is the init (conch
// itself), and the server is not there.
func TestServeContainedTTY(t *testing.T) {
	t.Parallel()
	off := []string{"--containment", "off"}
	for _, args := range [][]string{off, nil, {"--containment", "require"}} {
		cs, server := startStdio(t, serverOptions{marker: testutil.Marker(t), args: args})
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if tool.Name != "bash" {
				continue
			}
			if schema, _ := json.Marshal(tool.InputSchema); !strings.Contains(string(schema), `"tty"`) {
				t.Errorf("conch serve %v: tty not offered", args)
			}
		}
		if slices.Equal(args, off) {
			continue
		}
		// Seen once in CI (read "pid1=conch\n[exit code: 1]", not
		// reproduced in 160 runs with two CPU burners): a failure now
		// names what the command's stdin and stdout were.
		a := bash("echo pid1=$(</proc/1/comm); test -e /proc/" + strconv.Itoa(server) + " && echo server-visible; test -t 0 && echo tty || readlink /proc/self/fd/0 /proc/self/fd/1 >&2")
		a["tty"] = true
		if got := text(t, callTool(t, cs, "bash", a)); got != "pid1=conch\ntty\n" {
			t.Errorf("conch serve %v: tty call read %q, want it inside the init", args, got)
		}
	}
}
