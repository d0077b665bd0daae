//go:build linux

package acp_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/testutil"
)

// conchProc is a running `conch acp`.
type conchProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	cli    *client
	stderr *syncBuffer
	waited bool
}

// startConch runs `conch acp` in work, with more flags args, and more
// variables env.
func startConch(t *testing.T, state, work, marker string, env []string, args ...string) *conchProc {
	t.Helper()
	cmd := exec.Command(testutil.ConchBinary(t), append([]string{"acp", "--grace-ms", "500"}, args...)...)
	cmd.Dir = work
	cmd.Env = append(append(testutil.Env(marker), "XDG_STATE_HOME="+state), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
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
	p := &conchProc{t: t, cmd: cmd, cli: newClient(t, stdin, stdout), stderr: stderr}
	t.Cleanup(func() {
		if !p.waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// wait waits for conch to exit and checks it exits 0 and leaves nothing.
func (p *conchProc) wait(marker string) {
	p.t.Helper()
	done := make(chan error, 1)
	go func() {
		for range p.cli.in { // the output is read to its end before Wait
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		p.waited = true
		if err != nil {
			p.t.Errorf("conch acp exited with %v; stderr:\n%s", err, p.stderr.String())
		}
	case <-time.After(20 * time.Second):
		p.t.Fatalf("conch acp did not exit; stderr:\n%s", p.stderr.String())
	}
	if left := testutil.Processes(marker); len(left) > 0 {
		p.t.Errorf("processes left after conch acp exited: %v", left)
	}
}

// eof closes conch's stdin and waits for it to exit.
func (p *conchProc) eof(marker string) {
	p.t.Helper()
	p.cli.w.Close()
	p.wait(marker)
}

// cards keeps the updates that draw calls and messages (what a replay
// must reproduce), and lists the user messages apart.
func cards(us []map[string]any) (prompts []string, out []map[string]any) {
	for _, u := range us {
		if u["sessionUpdate"] == "user_message_chunk" {
			prompts = append(prompts, get(u, "content", "text").(string))
			continue
		}
		out = append(out, u)
	}
	return prompts, out
}

func firstText(u map[string]any) string {
	c, _ := get(u, "content").([]any)
	if len(c) == 0 {
		return ""
	}
	s, _ := get(c[0], "content", "text").(string)
	return s
}

func TestEndToEnd(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()

	p := startConch(t, state, work, marker, nil)
	c := p.cli
	// Bad input first: answered, logged, survived.
	c.sendRaw("this is not JSON")
	if m := c.recv(10 * time.Second); string(m.ID) != "null" || !strings.Contains(string(m.Error), "-32700") {
		t.Errorf("malformed line answered %s", m.raw)
	}
	if e := c.callErr("no/such_method", map[string]any{}); e.Code != -32601 {
		t.Errorf("unknown method: %+v", e)
	}
	if e := c.callErr("session/prompt", promptParams("sess_unknown", "echo hi")); e.Code != -32002 {
		t.Errorf("prompt for an unknown session: %+v", e)
	}
	c.initialize(true)
	sid := c.newSession(work)

	var live []map[string]any
	var prompts []string
	run := func(text string, want ...string) []map[string]any {
		t.Helper()
		stop, us := c.prompt(sid, text)
		if stop != "end_turn" {
			t.Errorf("%q: stop reason %s", text, stop)
		}
		if d := cmp.Diff(want, kinds(us)); d != "" {
			t.Fatalf("%q: updates (-want +got):\n%s", text, d)
		}
		prompts = append(prompts, text)
		live = append(live, us...)
		return us
	}

	us := run("echo hi", "tool_call", "tool_call_update")
	if get(us[0], "_meta", "terminal_info", "cwd") != work || get(us[1], "_meta", "terminal_output", "data") != "hi\n" ||
		get(us[1], "_meta", "terminal_exit", "exit_code") != float64(0) || get(us[1], "status") != "completed" {
		t.Errorf("echo hi: %s", jsonString(us))
	}
	// The background task ends only once the "touch go" prompt below runs,
	// so its notice comes with that prompt's result, not while idle.
	us = run("&until [ -e go ]; do sleep 0.01; done; echo bg", "tool_call", "tool_call_update")
	if get(us[0], "_meta") != nil || firstText(us[1]) != "```console\nstarted background task bash-1\n```" {
		t.Errorf("background: %s", jsonString(us))
	}
	us = run("exit 3", "tool_call", "tool_call_update")
	if get(us[1], "status") != "failed" || get(us[1], "_meta", "terminal_exit", "exit_code") != float64(3) {
		t.Errorf("exit 3: %s", jsonString(us))
	}
	us = run("touch go; sleep 1", "tool_call", "tool_call_update", "agent_message_chunk")
	const notice = "background task bash-1 (bash: until [ -e go ]; do sleep 0.01; done; echo bg) finished [status: completed, exit code: 0] after <T>. Last output:\nbg\nRead all of it with `/output bash-1`."
	if got, _ := get(us[2], "content", "text").(string); testutil.NoElapsed(got) != notice {
		t.Errorf("notice %q, want %q", got, notice)
	}
	us = run("/output bash-1", "tool_call", "tool_call_update")
	if firstText(us[1]) != "```console\nbg\n[status: completed, exit code: 0]\n```" {
		t.Errorf("/output: %s", jsonString(us))
	}

	// A command killed by session/cancel.
	id := c.start("session/prompt", promptParams(sid, "sleep 30"))
	first := c.recv(10 * time.Second)
	call := first.update(t)
	if call["sessionUpdate"] != "tool_call" {
		t.Fatalf("first update %s", first.raw)
	}
	testutil.WaitFor(t, 5*time.Second, "sleep 30 to start", func() bool { return len(testutil.Processes(marker)) > 1 })
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	resp, notes := c.await(id)
	if string(resp.Result) != `{"stopReason":"cancelled"}` {
		t.Errorf("cancelled prompt: %s", resp.raw)
	}
	rest := c.updates(notes, sid)
	if len(rest) != 1 || get(rest[0], "status") != "failed" || get(rest[0], "_meta", "terminal_output", "data") != "" ||
		get(rest[0], "_meta", "terminal_exit", "signal") != "SIGTERM" {
		t.Errorf("cancelled call: %s", jsonString(rest))
	}
	prompts = append(prompts, "sleep 30")
	live = append(live, call)
	live = append(live, rest...)
	// Only conch itself carries the marker now.
	testutil.WaitFor(t, 5*time.Second, "the cancelled command to end", func() bool { return len(testutil.Processes(marker)) == 1 })
	p.eof(marker)

	// A new conch loads the recorded session: the same cards, same ids.
	p = startConch(t, state, work, marker, nil)
	c = p.cli
	c.initialize(true)
	_, notes = c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
	gotPrompts, replayed := cards(c.updates(notes, sid))
	if d := cmp.Diff(prompts, gotPrompts); d != "" {
		t.Errorf("replayed prompts (-live +replayed):\n%s", d)
	}
	if d := cmp.Diff(live, replayed); d != "" {
		t.Errorf("replayed cards (-live +replayed):\n%s", d)
	}
	_, us = c.prompt(sid, "echo again")
	if get(us[0], "toolCallId") != "call-7" || get(us[1], "_meta", "terminal_output", "data") != "again\n" {
		t.Errorf("prompt after load: %s", jsonString(us))
	}
	p.eof(marker)
}

// TestEndToEndSIGTERM: SIGTERM, and SIGHUP alike, end conch acp with
// exit 0, its tasks killed.
func TestEndToEndSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			state, work := t.TempDir(), t.TempDir()
			p := startConch(t, state, work, marker, nil)
			c := p.cli
			c.initialize(false)
			sid := c.newSession(work)
			c.prompt(sid, "&sleep 60")
			c.prompt(sid, "&setsid sleep 60")
			testutil.WaitFor(t, 5*time.Second, "the tasks to start", func() bool { return len(testutil.Processes(marker)) >= 3 })
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			p.wait(marker)
			p.cli.w.Close()
		})
	}
}

// TestEndToEndIdleNotice: a background task that finishes while the
// session is idle is announced at once, as an agent message, without
// waiting for the next prompt.
func TestEndToEndIdleNotice(t *testing.T) {
	marker := testutil.Marker(t)
	state, work := t.TempDir(), t.TempDir()
	p := startConch(t, state, work, marker, nil)
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)
	if stop, _ := c.prompt(sid, "&sleep 0.3; echo done"); stop != "end_turn" {
		t.Fatalf("stop reason %s", stop)
	}
	m := c.recv(10 * time.Second)
	if m.Method != "session/update" {
		t.Fatalf("got %s, want an unsolicited session/update", m.raw)
	}
	u := m.update(t)
	const notice = "background task bash-1 (bash: sleep 0.3; echo done) finished [status: completed, exit code: 0] after <T>. Last output:\ndone\nRead all of it with `/output bash-1`."
	if got, _ := get(u, "content", "text").(string); u["sessionUpdate"] != "agent_message_chunk" || testutil.NoElapsed(got) != notice {
		t.Errorf("idle notice: %s", jsonString(u))
	}
	// Announced once: the next prompt carries no notice.
	if _, us := c.prompt(sid, "true"); len(us) != 2 {
		t.Errorf("updates after the idle notice: %s", jsonString(us))
	}
	p.eof(marker)
}

// TestEndToEndCancelRightAfterPrompt: conch acp honours a session/cancel
// that arrives together with its prompt, and kills the command.
func TestEndToEndCancelRightAfterPrompt(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	p := startConch(t, state, work, marker, nil)
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)
	cancel := jsonString(map[string]any{"jsonrpc": "2.0", "method": "session/cancel", "params": map[string]any{"sessionId": sid}})
	for i := 0; i < 10; i++ {
		id := c.startWith("session/prompt", promptParams(sid, "sleep 30"), cancel)
		if resp, _ := c.await(id); string(resp.Result) != `{"stopReason":"cancelled"}` {
			t.Fatalf("prompt %d answered %s", i, resp.raw)
		}
	}
	// Only conch itself carries the marker: no sleep survived.
	testutil.WaitFor(t, 5*time.Second, "the cancelled commands to end", func() bool { return len(testutil.Processes(marker)) == 1 })
	p.eof(marker)
}

// TestEndToEndEOFKillsEverything: the end of stdin ends conch acp with
// exit 0, its background tasks (escaped ones too) and its command in
// flight killed.
func TestEndToEndEOFKillsEverything(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	p := startConch(t, state, work, marker, nil)
	c := p.cli
	c.initialize(true)
	a, b := c.newSession(work), c.newSession(work)
	c.prompt(a, "&sleep 60")
	c.prompt(b, "&setsid sleep 60")
	c.start("session/prompt", promptParams(a, "sleep 60"))
	testutil.WaitFor(t, 5*time.Second, "the commands to start", func() bool { return len(testutil.Processes(marker)) >= 4 })
	p.eof(marker) // exit status 0 and no process left, or it fails
}

// TestEndToEndLoadAfterSIGKILL: a conch acp killed while a command runs
// leaves a record that the next conch loads: the unfinished call is drawn
// failed, and the session goes on and reloads whole.
func TestEndToEndLoadAfterSIGKILL(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	p := startConch(t, state, work, marker, nil)
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)
	c.prompt(sid, "echo one")
	c.start("session/prompt", promptParams(sid, "sleep 30"))
	if m := c.recv(10 * time.Second); get(m.update(t), "sessionUpdate") != "tool_call" {
		t.Fatalf("first update %s", m.raw)
	}
	testutil.WaitFor(t, 5*time.Second, "sleep 30 to start", func() bool { return len(testutil.Processes(marker)) > 1 })
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.waited = true
	p.cli.w.Close()
	for range p.cli.in {
	}
	// The killed conch's shell dies with it (parent-death signal); what
	// the shell started may outlive it, as the contract documents (and
	// may still be starting): kill it here until none is left.
	testutil.WaitFor(t, 5*time.Second, "the killed conch's processes to end", func() bool {
		left := testutil.Processes(marker)
		for _, pr := range left {
			syscall.Kill(pr.Pid, syscall.SIGKILL)
		}
		return len(left) == 0
	})

	load := func() []map[string]any {
		_, notes := c.call("session/load", map[string]any{"sessionId": sid, "cwd": work, "mcpServers": []any{}})
		return c.updates(notes, sid)
	}
	p = startConch(t, state, work, marker, nil)
	c = p.cli
	c.initialize(true)
	us := load()
	want := []string{"user_message_chunk", "tool_call", "tool_call_update", "user_message_chunk", "tool_call", "tool_call_update"}
	if d := cmp.Diff(want, kinds(us)); d != "" {
		t.Fatalf("replay after a SIGKILL (-want +got):\n%s", d)
	}
	if get(us[5], "status") != "failed" || get(us[2], "_meta", "terminal_output", "data") != "one\n" {
		t.Errorf("replay after a SIGKILL: %s", jsonString(us))
	}
	c.prompt(sid, "echo three")
	p.eof(marker)

	p = startConch(t, state, work, marker, nil)
	c = p.cli
	c.initialize(true)
	if us := load(); len(us) != 9 || get(us[8], "_meta", "terminal_output", "data") != "three\n" {
		t.Errorf("second replay: %s", jsonString(kinds(us)))
	}
	p.eof(marker)
}

// TestEndToEndPlantedFIFO: a FIFO planted as a session file neither hangs
// the session/load of it nor keeps conch acp from ending at the end of
// stdin or on SIGTERM.
func TestEndToEndPlantedFIFO(t *testing.T) {
	for _, end := range []string{"eof", "sigterm"} {
		t.Run(end, func(t *testing.T) {
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			state, work := t.TempDir(), t.TempDir()
			dir := filepath.Join(state, "conch", "sessions")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(dir, "sess_fifo.jsonl"), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startConch(t, state, work, marker, nil)
			c := p.cli
			c.initialize(true)
			id := c.start("session/load", map[string]any{"sessionId": "sess_fifo", "cwd": work, "mcpServers": []any{}})
			if m, _ := c.awaitWithin(id, 10*time.Second); !strings.Contains(string(m.Error), "it is a FIFO, not a regular file") {
				t.Errorf("load of a FIFO answered %s", m.raw)
			}
			start := time.Now()
			if end == "eof" {
				p.eof(marker)
			} else {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				p.wait(marker)
				c.w.Close()
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("conch acp took %v to end", took)
			}
		})
	}
}

// TestEndToEndDefaults: conch acp contains and sandboxes commands by
// default (docs/sandbox.md): a command runs in the init's PID namespace,
// where pid 1 is conch's init and the server is not to be seen, and a
// write outside the writable roots fails with the sandbox's marker on
// its card.
func TestEndToEndDefaults(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state, work := t.TempDir(), t.TempDir()
	// Outside the writable roots (/tmp is one), writable by the server.
	denied, err := os.MkdirTemp("/var/tmp", "conch-acp-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(denied) })
	// The denied write would be offered to run again outside the
	// sandbox; that question has its own tests (escalate_test.go).
	p := startConch(t, state, work, marker, nil, "--sandbox-escalation", "never")
	c := p.cli
	c.initialize(true)
	sid := c.newSession(work)

	_, us := c.prompt(sid, fmt.Sprintf("cat /proc/1/comm; test -e /proc/%d && echo server-visible", p.cmd.Process.Pid))
	if len(us) != 2 || get(us[1], "_meta", "terminal_output", "data") != "conch\n" {
		t.Errorf("pid 1 and the server as a command sees them: %s", jsonString(us))
	}
	_, us = c.prompt(sid, "touch "+denied+"/x")
	want := "touch: cannot touch '" + denied + "/x': Permission denied\n" +
		"[sandbox: write to " + denied + "/x denied under workspace-write mode; writable: " + work + ", "
	if len(us) != 2 || get(us[1], "_meta", "terminal_exit", "exit_code") != float64(1) {
		t.Fatalf("the denied write: %s", jsonString(us))
	}
	if data, _ := get(us[1], "_meta", "terminal_output", "data").(string); !strings.HasPrefix(data, want) || !strings.HasSuffix(data, "]") || strings.Count(data, "\n") != 1 {
		t.Errorf("the denied write's card: %q, want %q…]", data, want)
	}
	if _, err := os.Stat(denied + "/x"); err == nil {
		t.Errorf("the write outside the writable roots went through")
	}
	p.eof(marker)
}
