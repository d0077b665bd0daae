//go:build linux

package tools_test

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/tools"
)

// TestShown: every control character, line break and invisible
// formatting character is written as an escape, bytes that are not UTF-8
// too, and a long text is cut at 2,000 bytes (never inside a character)
// with what was left out counted.
func TestShown(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ls -la", "ls -la"},
		{"a\nb\r\tc", `a\nb\r\tc`},
		{"\x1b[2J\x00\x7f", `\x1b[2J\x00\x7f`},
		{"rm\u202e\u2066x\u200b\ufeff", `rm\u202e\u2066x\u200b\ufeff`},
		{"\u0085\u2028\u2029", `\u0085\u2028\u2029`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{"héllo wörld — ✓", "héllo wörld — ✓"},
		{strings.Repeat("x", 2000), strings.Repeat("x", 2000)},
		{strings.Repeat("x", 2001), strings.Repeat("x", 2000) + "… 1 more bytes"},
		{strings.Repeat("x", 1999) + "é" + strings.Repeat("y", 10), strings.Repeat("x", 1999) + "… 12 more bytes"},
	} {
		if got := tools.Shown(c.in); got != c.want {
			t.Errorf("Shown(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestQuestionTexts pins the three questions and their choices
// (docs/rules.md#asking, docs/sandbox.md#escalation): the reason and the
// directory come before the command, and a command that tries to forge
// lines, clear the screen, reverse its text or hide its length cannot.
func TestQuestionTexts(t *testing.T) {
	forged := "echo ok\nDirectory: /home/u/safe\nReason: harmless\x1b[2J\u202erm -rf ~ #" + strings.Repeat(" ", 2100)
	var b strings.Builder
	for _, q := range []tools.Question{
		{Kind: tools.AskRule, Command: "git push origin main", Cwd: "/src/app", Subject: "git push origin main", Reason: "rule Bash(git push:*)", SessionPrefix: "git push"},
		{Kind: tools.AskRule, Command: "ls && git push", Cwd: "/src/app", Subject: "git push", Reason: "rule Bash(git push:*)", SessionPrefix: "git push"},
		{Kind: tools.AskRule, Command: forged, Cwd: "/src/app\nReason: none", Subject: "$X", Reason: "dynamic command"},
		{Kind: tools.AskRerun, Command: "echo x > ~/outside", Cwd: "/src/app", Reason: "the sandbox denied a write to /home/u/outside"},
		{Kind: tools.AskRerun, Command: "go get example.com/m", Cwd: "/src/app", Reason: "the sandbox denied a write to /home/u/go/pkg/mod/cache/x", Grant: "/home/u/go/pkg/mod"},
		{Kind: tools.AskRerun, Command: forged, Cwd: "/src/app", Reason: "the sandbox denied a write to /home/u/x\ny", Grant: "/home/u/a\nb"},
		{Kind: tools.AskOutside, Command: "docker ps", Cwd: "/src/app", Reason: "list the running containers\nDirectory: /"},
	} {
		b.WriteString("=== message\n" + q.Message() + "\n--- choices\n" + tools.ChoiceOnce + "\n")
		if c := q.SessionChoice(); c != "" {
			b.WriteString(c + "\n")
		}
		b.WriteString(tools.ChoiceDeny + "\n")
	}
	golden(t, "questions", b.String())
}
