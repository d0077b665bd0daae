package tools

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QuestionKind says what a Question asks the user.
type QuestionKind int

const (
	// AskRule: the rules want a yes before the command runs
	// (docs/rules.md#asking).
	AskRule QuestionKind = iota
	// AskRerun: the sandbox denied the command something; may it run
	// again outside the sandbox, or with a directory granted for the
	// session (docs/sandbox.md#escalation)?
	AskRerun
	// AskOutside: the model asked to run the command outside the
	// sandbox (outside_sandbox) before it ran.
	AskOutside
)

// Question is what the user is asked about a command: by the rules before
// it runs, after the sandbox denied it something, or when the model asks
// to run it outside the sandbox.
type Question struct {
	Kind QuestionKind
	// Command is the whole command line, as the model sent it.
	Command string
	// Cwd is the directory it runs in.
	Cwd string
	// Subject is the simple command that needs the yes (`git push`), or
	// the whole line when it could not be parsed (AskRule).
	Subject string
	// Reason is why: for AskRule `rule <rule>`, `dynamic command`,
	// `cannot parse` or `assignment to <NAME>`; for AskRerun what the
	// sandbox denied; for AskOutside the model's justification.
	Reason string
	// SessionPrefix, when not "", is what "allow for this session" would
	// remember (`git push`, AskRule): offer that choice only then.
	SessionPrefix string
	// Grant, when not "", is the directory "Allow writes to <dir> for
	// this session" would let the session's commands write (AskRerun).
	Grant string
	// Network, when set, makes this a network policy's question about a
	// destination (netask.go); the other fields are not shown.
	Network *NetworkQuestion
}

// Labels of the choices a transport offers the user, in this order:
// ChoiceOnce, Question.SessionChoice (when not ""), ChoiceDeny.
const (
	ChoiceOnce = "Allow once"
	ChoiceDeny = "Deny"
)

// SessionChoice is the label of the "for this session" choice, "" when it
// is not offered: `Allow <prefix> for this session` for a rule,
// `Allow writes to <dir> for this session` after a denial.
func (q Question) SessionChoice() string {
	switch {
	case q.Network != nil:
		return q.Network.sessionChoice()
	case q.Kind == AskRule && q.SessionPrefix != "":
		return "Allow " + Shown(q.SessionPrefix) + " for this session"
	case q.Kind == AskRerun && q.Grant != "":
		return "Allow writes to " + Shown(q.Grant) + " for this session"
	}
	return ""
}

// rerunNote ends the question asked after a denial: a second run is a
// whole second run.
const rerunNote = "The command runs again in full; what it did the first time stays done."

// Message is the text shown to the user (docs/rules.md#asking): what
// conch asks, then the reason and the directory, and the command last,
// each as Shown draws it, so that nothing in them can forge a line of
// the question or hide what runs.
func (q Question) Message() string {
	if q.Network != nil {
		return q.Network.message()
	}
	ask, reason, after := "Allow this command to run?", q.Reason, ""
	switch q.Kind {
	case AskRerun:
		ask, after = "Run this command again outside the sandbox?", "\n\n"+rerunNote
	case AskOutside:
		ask = "Run this command outside the sandbox?"
	default:
		if q.Subject != "" && q.Subject != q.Command {
			reason += ": " + q.Subject
		}
	}
	return ask + "\n\nReason: " + Shown(reason) + "\nDirectory: " + Shown(q.Cwd) + "\nCommand: " + Shown(q.Command) + after
}

// MaxShownBytes is how much of a command (or a reason, or a directory) a
// question shows; the rest is counted: `… <N> more bytes`.
const MaxShownBytes = 2000

// Shown is s as a question shows it: its first MaxShownBytes bytes (never
// a broken character), followed by `… <N> more bytes` when it is longer,
// with every control character, line break and invisible formatting
// character (bidi controls included) written as an escape: `\n`, `\r`,
// `\t`, `\x1b` for the other C0 controls and DEL, `\u202e` (four hex
// digits, or `\U000e0001` with eight) for the others, and `\xff` for a
// byte that is not UTF-8. What a user reads is then what runs, on the
// lines the question gives it.
func Shown(s string) string {
	rest := 0
	if len(s) > MaxShownBytes {
		cut := MaxShownBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s, rest = s[:cut], len(s)-cut
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x` + hex(uint32(s[i]), 2))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + hex(uint32(r), 2))
		case hidden(r) && r <= 0xffff:
			b.WriteString(`\u` + hex(uint32(r), 4))
		case hidden(r):
			b.WriteString(`\U` + hex(uint32(r), 8))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	if rest > 0 {
		b.WriteString("… " + strconv.Itoa(rest) + " more bytes")
	}
	return b.String()
}

// hidden reports whether r changes how the text around it reads without
// showing itself: C1 controls, formatting characters (bidi embeddings,
// overrides and isolates, zero-width characters, U+FEFF) and the line
// and paragraph separators.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

func hex(v uint32, digits int) string {
	s := strconv.FormatUint(uint64(v), 16)
	return strings.Repeat("0", max(digits-len(s), 0)) + s
}
