//go:build linux

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/audit"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/ops"
)

// writeAudit writes a session's events to a log at path.
func writeAudit(t *testing.T, path string, n int) *audit.Log {
	t.Helper()
	l, err := audit.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.Record(context.Background(), ops.Call{Owner: "s1", Tool: "bash", Command: "echo " + strings.Repeat("x", i)})
		l.Record(context.Background(), ops.Process{Owner: "s1", ExitCode: i % 3, Duration: time.Millisecond, OutputBytes: int64(i + 1)})
	}
	l.Sync()
	return l
}

// TestAuditVerify: conch audit verify passes an intact log (exit 0),
// names the seq of a removed line (exit 1), and reads the path from the
// configuration when no FILE is given.
func TestAuditVerify(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	writeAudit(t, path, 5).Close()
	cfg := writeConfig(t, "[audit]\npath = \""+path+"\"\n")

	stdout, stderr, code := testutil.RunConch(t, marker, "audit", "verify", "--config", cfg)
	if code != 0 || stdout != "the audit log verifies: 10 lines, seq 1 to 10, in audit.jsonl\n" {
		t.Errorf("verify: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(append(lines[:3:3], lines[4:]...), "")), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = testutil.RunConch(t, marker, "audit", "verify", path)
	want := "seq 4: removed (no line has this seq)\nthe audit log does not verify: 1 problems; 9 lines, seq 1 to 10, in audit.jsonl\n"
	if code != 1 || stdout != want {
		t.Errorf("verify of a log with a line removed: exit %d, stdout %q, stderr %q; want exit 1 and %q", code, stdout, stderr, want)
	}

	_, stderr, code = testutil.RunConch(t, marker, "audit", "verify", filepath.Join(dir, "nothing.jsonl"))
	if code != 2 || !strings.Contains(stderr, "conch audit verify: read "+filepath.Join(dir, "nothing.jsonl")+": file does not exist") {
		t.Errorf("verify of no file: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = testutil.RunConch(t, marker, "audit", "verify", "--audit-path", "off")
	if code != 2 || !strings.Contains(stderr, "the audit log is off") {
		t.Errorf("verify with the log off: exit %d, stderr %q", code, stderr)
	}
}

// TestAuditTail: the last lines for a person, then -f prints each new
// line as it is written, until interrupted.
func TestAuditTail(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l := writeAudit(t, path, 5)
	defer l.Close()

	stdout, stderr, code := testutil.RunConch(t, marker, "audit", "tail", "-n", "2", path)
	got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(got) != 2 || !strings.Contains(got[0], " #9 s1 call bash: echo xxxx") || !strings.Contains(got[1], " #10 s1 process exit code 1 after 1ms, 5 bytes of output") {
		t.Errorf("tail -n 2: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	cmd := testutil.Conch(t, marker, "audit", "tail", "-n", "1", "-f", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatal("conch audit tail -f printed nothing")
			return ""
		}
	}
	if l := next(); !strings.Contains(l, " #10 ") {
		t.Fatalf("tail -f starts with %q, want seq 10", l)
	}
	// Follow starts at the end once the last lines are printed; a line
	// written from now on shows.
	l.Record(context.Background(), ops.Denied{Owner: "s2", Path: "/etc/\x1b]0;x\x07", Op: "write", Reason: "read-only"})
	if got := next(); !strings.HasSuffix(got, ` #11 s2 denied write /etc/\x1b]0;x\x07: read-only`) {
		t.Errorf("tail -f printed %q", got)
	}
	cmd.Process.Signal(syscall.SIGINT)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("tail -f after SIGINT: %v", err)
	}
}

// TestAuditConfig: conch config shows the [audit] and [telemetry] keys
// and where they came from, the default audit log in the state
// directory, and refuses a relative path.
func TestAuditConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	state := t.TempDir()
	cmd := testutil.Conch(t, marker, "config", "run")
	cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+state)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`audit.path = "` + filepath.Join(state, "conch", "audit.jsonl") + `"  # default`,
		"audit.max_bytes = 67108864  # default",
		`telemetry.otlp_endpoint = ""  # default`,
	} {
		if !strings.Contains(string(out), line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, out)
		}
	}

	p := writeConfig(t, "[audit]\npath = \"off\"\nmax_bytes = 100000\n\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\n")
	stdout, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
	for _, line := range []string{
		`audit.path = "off"  # ` + p + ":2",
		"audit.max_bytes = 100000  # " + p + ":3",
		`telemetry.otlp_endpoint = "http://127.0.0.1:4318"  # ` + p + ":6",
	} {
		if code != 0 || !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config (exit %d, %q) lacks %q:\n%s", code, stderr, line, stdout)
		}
	}
	bad := writeConfig(t, "[audit]\npath = \"audit.jsonl\"\n")
	if _, stderr, code := testutil.RunConch(t, marker, "run", "--config", bad, "--", "true"); code != 2 ||
		!strings.Contains(stderr, `audit.path: must be an absolute path, or "off"`) {
		t.Errorf("a relative audit path: exit %d, stderr %q", code, stderr)
	}
	grpc := testutil.Conch(t, marker, "run", "--otlp-endpoint", "http://127.0.0.1:1", "--", "true")
	grpc.Env = append(grpc.Env, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	if out, err := grpc.CombinedOutput(); err == nil || !strings.Contains(string(out), "conch sends OTLP over HTTP") {
		t.Errorf("OTLP over grpc asked for: %v, %s", err, out)
	}
}

// TestAuditFileOutOfReach: a command cannot read, list, write, move or
// remove the audit log: it lives in conch's state directory, which the
// sandbox hides behind an empty read-only directory (CONTRACT 16.1,
// docs/security.md), also when the workspace holds it and the file is the
// command's user's own. As root and as uid 65534.
func TestAuditFileOutOfReach(t *testing.T) {
	t.Parallel()
	for _, unpriv := range []bool{false, true} {
		name := "root"
		if unpriv {
			name = "uid65534"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			attack := func(path string) string {
				return "cat " + path + "; ls -a " + filepath.Dir(path) + "; echo forged >> " + path + "; rm -f " + path + "; mv " + path + " " + path + ".x; ls " + path
			}
			var cmd *exec.Cmd
			var path string
			if unpriv {
				cmd = unprivConch(t, marker) // XDG_STATE_HOME and the cwd: a directory of uid 65534
				path = filepath.Join(cmd.Dir, "conch", "audit.jsonl")
				cmd.Args = append(cmd.Args, "run", "--sandbox", "workspace-write", "--cwd", cmd.Dir, "--", attack(path))
			} else {
				state := t.TempDir()
				path = filepath.Join(state, "conch", "audit.jsonl")
				cmd = testutil.Conch(t, marker, "run", "--sandbox", "workspace-write", "--cwd", state, "--", attack(path))
				cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+state)
			}
			writeAudit(t, path, 2).Close()
			if unpriv {
				for _, p := range []string{filepath.Dir(path), path, path + ".lock"} {
					if err := os.Chown(p, testutil.UnprivilegedID, testutil.UnprivilegedID); err != nil {
						t.Fatal(err)
					}
				}
			}
			before, _ := os.ReadFile(path)
			out, _ := cmd.CombinedOutput()
			if strings.Contains(string(out), `"seq":`) || strings.Contains(string(out), "audit.jsonl.lock") {
				t.Errorf("the command read the audit log or its directory:\n%s", out)
			}
			if !strings.Contains(string(out), "Read-only file system") {
				t.Errorf("the command's writes were not refused:\n%s", out)
			}
			// conch run writes the call's own lines after the two there
			// were, its call and its process (the file is the default audit log); the chain
			// verifying shows that nothing else was written.
			if after, _ := os.ReadFile(path); !strings.HasPrefix(string(after), string(before)) || strings.Count(string(after), "\n") != strings.Count(string(before), "\n")+2 {
				t.Errorf("a command changed the audit log:\n%s\n%s", out, after)
			}
			if r, err := audit.Verify(path); err != nil || !r.OK() {
				t.Errorf("verify after the attempt: %v %+v", err, r)
			}
		})
	}
}
