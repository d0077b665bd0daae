//go:build linux

package tools_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/conch-dev/conch/tools"
)

// TestCleanControls: the C1 control characters (U+0080–U+009F) are
// removed like the escape sequences they stand for (CSI U+009B, OSC
// U+009D, DCS U+0090, SOS U+0098, PM U+009E and APC U+009F start one,
// ST U+009C ends a string), and so are BEL, BS, VT, FF and DEL; tab and
// newline stay. A backspace or a cursor move must not hide text from a
// client that draws the result in a terminal.
func TestCleanControls(t *testing.T) {
	for in, want := range map[string]string{
		"safe\b\b\b\bevil\n":                         "safeevil\n",
		"bell\a here":                                "bell here",
		"vt\vff\fdel\x7f.":                           "vtffdel.",
		"tab\tand\nnewline\n":                        "tab\tand\nnewline\n",
		"\u009b2Jcleared":                            "cleared",
		"a\u009b31mred\u009b0m b":                    "ared b",
		"\u009d0;title\u009cafter":                   "after",
		"\u009d0;title\aafter":                       "after",
		"\u009d8;;http://x\u009clink\u009d8;;\u009c": "link",
		"\u0090q\u009cdcs":                           "dcs",
		"\u009fapc\x1b\\x":                           "x",
		"nel\u0085ind\u0084ss2\u008e.":               "nelindss2.",
		"\u009b12\nbroken":                           "\nbroken",
		"50%\r\u009bK60%\n":                          "60%\n",
		"x\r\a\ny":                                   "x\r\ny",
		"\u009dunterminated\nnext":                   "\nnext",
		"é ü \u00a0 \u00ff":                          "é ü \u00a0 \u00ff", // U+00A0 and up are text
		"lone \xc2 and \x9b bytes":                   "lone \uFFFD and \uFFFD bytes",
	} {
		if got := tools.CleanText(in); got != want {
			t.Errorf("CleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCleanControls: nothing the cleaner returns holds a control that a
// terminal acts on, other than tab, newline and a carriage return before
// a newline; and it is idempotent.
func FuzzCleanControls(f *testing.F) {
	for _, s := range []string{"a\b\bb", "\u009b2J", "\u009d0;t\u009c", "x\r\a\ny", "\xc2\x9b", "\u009b\x1b[1m\u009c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := tools.CleanText(s)
		if !utf8.ValidString(got) {
			t.Fatalf("CleanText(%q) = %q is not UTF-8", s, got)
		}
		for _, r := range strings.ReplaceAll(got, "\r\n", "\n") {
			if r < 0x20 && r != '\t' && r != '\n' && r != 0 && (r < 0x01 || r > 0x06) && (r < 0x0e || r > 0x1a) && (r < 0x1c || r > 0x1f) ||
				r >= 0x7f && r <= 0x9f {
				t.Fatalf("CleanText(%q) = %q keeps %U", s, got, r)
			}
		}
		if again := tools.CleanText(got); again != got {
			t.Fatalf("not idempotent: %q → %q → %q", s, got, again)
		}
	})
}

// BenchmarkCleanText cleans 64 KB of plain text (the common case, which
// needs no change) and 64 KB with colours.
func BenchmarkCleanText(b *testing.B) {
	lines := func(line string) string {
		s := strings.Repeat(line, 64000/len(line)+1)[:64000]
		return s[:strings.LastIndexByte(s, '\n')+1]
	}
	plain := lines("ok  \tgithub.com/conch-dev/conch/tools\t0.324s — résumé\n")
	colour := lines("\x1b[32mok\x1b[0m  github.com/conch-dev/conch/tools 0.324s\n")
	for _, c := range []struct{ name, in string }{{"plain", plain}, {"colour", colour}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				tools.CleanText(c.in)
			}
		})
	}
}
