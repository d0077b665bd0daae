//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// These tests run conch as an ordinary user (uid 65534), as its commands
// run: as root they would prove nothing, because root's CAP_SYS_PTRACE
// passes the checks that a non-dumpable process relies on. A command
// running as root can still read the server's environment and memory and
// write to its stdout through /proc/<pid>/; only hiding the server from
// the command (its own PID namespace, a later step) closes that.

// The secret conch holds in its environment. Commands name it split in
// two, so that finding it in conch's memory cannot be finding the command
// line conch was given.
const (
	unprivSecretA = "sk-unpriv-"
	unprivSecretB = "5c0d9e2b7a41f3e8"
)

// unprivConch returns a conch command run as uid 65534 with the secret in
// its environment, in a directory of its own.
func unprivConch(t *testing.T, marker string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testutil.ConchBinary(t), args...)
	testutil.Unprivileged(t, cmd)
	dir := testutil.UnprivilegedDir(t)
	cmd.Dir = dir
	cmd.Env = append(testutil.Env(marker), "HOME="+dir, "TMPDIR="+dir, "XDG_STATE_HOME="+dir,
		"OPENAI_API_KEY="+unprivSecretA+unprivSecretB)
	return cmd
}

// TestUnprivilegedCommandCannotReadServer: a command cannot read conch's
// environment nor its memory through /proc/$PPID, although both run as
// the same user.
func TestUnprivilegedCommandCannotReadServer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, command string }{
		{"environ", `echo "parent=$(cat /proc/$PPID/comm)"; tr "\0" "\n" </proc/$PPID/environ | grep OPENAI`},
		// Every readable mapping of the parent, searched for the secret.
		{"mem", `echo "parent=$(cat /proc/$PPID/comm)"; perl -e '
			open(M, "<", "/proc/$ARGV[0]/maps") or die "maps: $!\n";
			open(F, "<", "/proc/$ARGV[0]/mem") or die "mem: $!\n";
			my $s = $ARGV[1] . $ARGV[2];
			while (<M>) {
				my ($a, $b, $p) = /^(\w+)-(\w+) (\S+)/ or next;
				next if $p !~ /^r/ || hex($b) - hex($a) > 1 << 28;
				sysseek(F, hex($a), 0) or next;
				my $got = sysread(F, my $buf, hex($b) - hex($a));
				if ($got && index($buf, $s) >= 0) { print "found: $s\n"; exit 0 }
			}
			print "not found\n"' $PPID ` + unprivSecretA + " " + unprivSecretB},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			cmd := unprivConch(t, marker, "run", "--", c.command)
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), "parent=conch\n") {
				t.Fatalf("the command's parent is not conch: %q", out)
			}
			if strings.Contains(string(out), unprivSecretA+unprivSecretB) {
				t.Errorf("the command read the secret: %q", out)
			}
			if !strings.Contains(string(out), "Permission denied") {
				t.Errorf("reading /proc/$PPID/%s did not fail: %q", c.name, out)
			}
		})
	}
}

// injectCommand writes a JSON-RPC message carrying injected to conch's
// stdout through /proc/$PPID/fd/1 (the command names the marker split in
// two, so that it cannot reach the stream as part of the command).
const (
	injected      = "injected-3f9a1c"
	injectCommand = `echo "parent=$(cat /proc/$PPID/comm)"; ` +
		`printf '{"jsonrpc":"2.0","method":"%s","params":{"level":"error","data":"%s-%s"}}\n' "$1" injected 3f9a1c >/proc/$PPID/fd/1`
)

// TestUnprivilegedCommandCannotWriteProtocol: a command that writes a
// JSON-RPC message to /proc/$PPID/fd/1 under conch serve or conch acp
// (stdio) fails, and nothing of it reaches the client.
func TestUnprivilegedCommandCannotWriteProtocol(t *testing.T) {
	t.Parallel()
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		stdin, stdout, stream := startUnprivStdio(t, "serve")
		client := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, legacyMCP)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		got := text(t, callTool(t, cs, "bash", bash("set -- notifications/message; "+injectCommand)))
		if !strings.Contains(got, "parent=conch\n") {
			t.Fatalf("the command's parent is not conch: %q", got)
		}
		if !strings.Contains(got, "Permission denied") || !strings.Contains(got, "[exit code: 1]") {
			t.Errorf("the write to /proc/$PPID/fd/1 did not fail: %q", got)
		}
		// A call after it: the injected line would have arrived before.
		callTool(t, cs, "bash", bash("true"))
		if strings.Contains(stream.String(), injected) {
			t.Errorf("the command wrote into the MCP stream:\n%s", stream.String())
		}
	})
	t.Run("acp", func(t *testing.T) {
		t.Parallel()
		stdin, stdout, stream := startUnprivStdio(t, "acp")
		acp := newACPScript(t, stdin, stdout)
		sid := acp.session("/")
		if sid == "" {
			t.Fatalf("no session: %s", stream.String())
		}
		acp.prompt(sid, "set -- session/update; "+injectCommand)
		acp.prompt(sid, "true")
		all := stream.String()
		if !strings.Contains(all, "parent=conch") {
			t.Fatalf("the command's parent is not conch:\n%s", all)
		}
		if !strings.Contains(all, "Permission denied") {
			t.Errorf("the write to /proc/$PPID/fd/1 did not fail:\n%s", all)
		}
		if strings.Contains(all, injected) {
			t.Errorf("the command wrote into the ACP stream:\n%s", all)
		}
	})
}

// acpScript is a scripted ACP client: it sends requests one at a time
// and reads conch acp's output up to each response.
type acpScript struct {
	t      *testing.T
	stdin  io.Writer
	lines  *bufio.Reader
	nextID int
	// notes are the lines read before the last response (the
	// notifications and requests of the agent).
	notes []string
}

func newACPScript(t *testing.T, stdin io.Writer, stdout io.Reader) *acpScript {
	return &acpScript{t: t, stdin: stdin, lines: bufio.NewReader(stdout), nextID: 1}
}

// call sends a request and returns its response line.
func (a *acpScript) call(method string, params any) string {
	a.t.Helper()
	id := a.nextID
	a.nextID++
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := a.stdin.Write(append(msg, '\n')); err != nil {
		a.t.Fatal(err)
	}
	a.notes = nil
	for {
		line, err := a.lines.ReadString('\n')
		if err != nil {
			a.t.Fatalf("%s: %v", method, err)
		}
		if strings.HasPrefix(line, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id)) {
			return line
		}
		a.notes = append(a.notes, line)
		a.reject(line)
	}
}

// reject answers a permission request of the agent (to run a command
// again outside the sandbox) with the user's no.
func (a *acpScript) reject(line string) {
	a.t.Helper()
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal([]byte(line), &req) != nil || req.Method != "session/request_permission" {
		return
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
		"result": map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject_once"}}})
	if _, err := a.stdin.Write(append(msg, '\n')); err != nil {
		a.t.Fatal(err)
	}
}

// session initializes the connection and opens a session in cwd; it
// returns the session's id ("" when none was opened).
func (a *acpScript) session(cwd string) string {
	a.t.Helper()
	a.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	return a.newSession(cwd)
}

// newSession opens another session in cwd and returns its id ("" when
// none was opened).
func (a *acpScript) newSession(cwd string) string {
	a.t.Helper()
	var session struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	json.Unmarshal([]byte(a.call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})), &session)
	return session.Result.SessionID
}

// prompt sends text as a prompt of session sid and returns the response.
func (a *acpScript) prompt(sid, text string) string {
	a.t.Helper()
	return a.call("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
}

// card runs command as a prompt of session sid and returns the text of
// its card's last content (without its console fence).
func (a *acpScript) card(sid, command string) string {
	a.t.Helper()
	a.prompt(sid, command)
	var text string
	for _, line := range a.notes {
		var n struct {
			Params struct {
				Update struct {
					Content []struct {
						Content struct{ Text string }
					}
				}
			}
		}
		if json.Unmarshal([]byte(line), &n) == nil && len(n.Params.Update.Content) > 0 {
			text = n.Params.Update.Content[0].Content.Text
		}
	}
	body, pre := strings.CutPrefix(text, "```console\n")
	body, post := strings.CutSuffix(body, "\n```")
	if !pre || !post {
		a.t.Fatalf("%s: no console card in %q", command, a.notes)
	}
	return body
}

// startUnprivStdio starts conch sub (serve or acp) as uid 65534 on stdio
// and returns its stdin and its stdout, whose every byte is also
// recorded in stream. At the end of the test its stdin is closed, and it
// must exit 0 and leave no process.
func startUnprivStdio(t *testing.T, sub string) (stdin io.WriteCloser, stdout io.ReadCloser, stream *testutil.Buffer) {
	t.Helper()
	marker := testutil.Marker(t)
	return startRecorded(t, unprivConch(t, marker, sub), marker, true)
}

// startRecorded starts cmd, a conch subcommand with marker speaking on
// stdio, run as the unprivileged user when nobody is set, as
// startUnprivStdio does.
func startRecorded(t *testing.T, cmd *exec.Cmd, marker string, nobody bool) (stdin io.WriteCloser, stdout io.ReadCloser, stream *testutil.Buffer) {
	t.Helper()
	sub := cmd.Args[1]
	cmd.Stderr = newLogBuffer(t, "conch "+sub)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// conch's stdout is a pipe that conch's user owns, as when a client
	// running as that user starts it: the kernel refuses root's pipe to
	// uid 65534 whatever conch does.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if nobody {
		if err := w.Chown(testutil.UnprivilegedID, testutil.UnprivilegedID); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("conch %s: %v", sub, err)
		}
		r.Close()
		testutil.AssertNoProcesses(t, marker)
	})
	stream = &testutil.Buffer{}
	return stdin, recordingReader{r, stream}, stream
}

// recordingReader is a file whose reads are recorded in rec.
type recordingReader struct {
	*os.File
	rec *testutil.Buffer
}

func (r recordingReader) Read(p []byte) (int, error) {
	n, err := r.File.Read(p)
	r.rec.Write(p[:n])
	return n, err
}
