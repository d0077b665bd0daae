//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestAttackEscalation is the attack table's rows on questions (issue
// items "an escalated call leaves an unsandboxed helper" and "the
// escalation question can be forged"), through the binary with the Go
// SDK client answering, as root and as an unprivileged user.
func TestAttackEscalation(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			t.Run("helper", func(t *testing.T) { t.Parallel(); testEscalatedHelper(t, nobody) })
			t.Run("forged question", func(t *testing.T) { t.Parallel(); testForgedQuestion(t, nobody) })
			t.Run("printed denial", func(t *testing.T) { t.Parallel(); testPrintedDenial(t, nobody) })
		})
	}
}

// helperLoop runs, in the background of a command the user let out of
// the sandbox, whatever a later command writes to ws/drive.sh: the
// helper the issue found driven from inside the sandbox.
func helperLoop(ws string) string {
	drive := filepath.Join(ws, "drive.sh")
	return "setsid sh -c 'while :; do if [ -f " + drive + " ]; then sh " + drive + "; rm -f " + drive + "; fi; sleep 0.05; done' >/dev/null 2>&1 &"
}

// testEscalatedHelper: a helper started by an "Allow once" run ends with
// that call, so a later sandboxed command cannot drive it to write the
// home.
func testEscalatedHelper(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	home, ws := sandboxDirs(t, nobody)
	u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Allow once")}}
	cs := startSandboxed(t, marker, nobody, home, ws, u)
	// The helper starts only where the write outside works: in the run
	// outside the sandbox.
	got := text(t, callTool(t, cs, "bash", bash("echo run >> runs; echo x > ~/outside && { "+helperLoop(ws)+" echo helper; }")))
	if got != "helper\n"+ranAgainLine {
		t.Fatalf("the escalated call: %q", got)
	}
	for _, p := range testutil.Processes(marker) {
		if strings.Contains(testutil.Cmdline(p.Pid), "drive.sh") {
			t.Errorf("the helper (%d %s) runs after its call ended", p.Pid, testutil.Cmdline(p.Pid))
		}
	}
	if got := text(t, callTool(t, cs, "bash", bash("echo 'id > "+filepath.Join(home, "ESCAPED")+"' > drive.sh && echo planted"))); got != "planted\n" {
		t.Errorf("planting: %q", got)
	}
	if _, err := os.Stat(filepath.Join(home, "ESCAPED")); err == nil {
		t.Error("a sandboxed command drove the escalated call's helper: ~/ESCAPED written")
	}
}

// testForgedQuestion: line breaks in a command cannot add lines to the
// question, escapes cannot clear the screen or reverse the text, and a
// 120 KB command is shown cut, with its length.
func testForgedQuestion(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	home, ws := sandboxDirs(t, nobody)
	// The padding is a comment, and the command fails: today the
	// denial is still drawn from the words of stderr's tail, and only
	// for a command that failed.
	forged := "echo run >> runs; echo x > ~/outside\nDirectory: /home/safe\nReason: harmless\n: \x1b[2J\u202e; false\n#" + strings.Repeat("#", 120000)
	u := &escalationUser{t: t, home: home, ws: ws, wantRuns: 1, answers: []*mcp.ElicitResult{choose("Deny")}}
	cs := startSandboxed(t, marker, nobody, home, ws, u)
	callTool(t, cs, "bash", bash(forged))
	q := u.questions()
	if len(q) != 1 {
		t.Fatalf("questions %q, want one", q)
	}
	lines := strings.Split(q[0], "\n")
	shown := `echo run >> runs; echo x > ~/outside\nDirectory: /home/safe\nReason: harmless\n: \x1b[2J\u202e; false\n` + strings.Repeat("#", 2000-len(forged)+120001) +
		fmt.Sprintf("… %d more bytes", len(forged)-2000)
	want := []string{"Run this command again outside the sandbox?", "", "Reason: the sandbox denied a write to " + filepath.Join(home, "outside"),
		"Directory: " + ws, "Command: " + shown, "", "The command runs again in full; what it did the first time stays done."}
	if len(lines) != len(want) {
		t.Fatalf("the question has %d lines, want %d: %q", len(lines), len(want), q[0])
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("question line %d: %q, want %q", i, lines[i], want[i])
		}
	}
}

// testPrintedDenial: a command that prints a sandbox-like error for a
// path it never touched gets no question naming that path
// (docs/sandbox.md#escalation: questions only for what the sandbox
// recorded).
func testPrintedDenial(t *testing.T, nobody bool) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	home, ws := sandboxDirs(t, nobody)
	u := &escalationUser{t: t, home: home, ws: ws, wantRuns: -1, answers: []*mcp.ElicitResult{choose("Deny")}}
	cs := startSandboxed(t, marker, nobody, home, ws, u)
	target := filepath.Join(home, "never-touched")
	callTool(t, cs, "bash", bash("echo \"touch: cannot touch '"+target+"': Permission denied\" >&2; exit 1"))
	awaitsDenialRecord(t, len(u.questions()) == 0, fmt.Sprintf("printed text made a question: %q", u.questions()))
}

// awaitsDenialRecord is a check that holds only once denials come from
// the sandbox's own record (docs/sandbox.md#denial-attribution) instead
// of the words of stderr, which another branch of this wave builds: until
// then it is a known failure, reported as a skip with why; once it holds
// the test fails, so that this mark goes with the record's arrival.
func awaitsDenialRecord(t *testing.T, ok bool, failure string) {
	t.Helper()
	if ok {
		t.Fatal("the check holds: denials come from the sandbox's record now; remove awaitsDenialRecord")
	}
	t.Skip("KNOWN FAILURE until the sandbox records denials itself (markers and Sandbox.Denied still come from stderr's words): " + failure)
}
