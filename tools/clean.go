package tools

import (
	"strings"
	"unicode/utf8"
)

// cleanText is s as a model should read it: terminal escape sequences
// and control characters removed, a line rewritten with carriage returns
// reduced to its last state, invalid UTF-8 replaced with U+FFFD. Text
// that needs none of it is returned as is, without a copy.
//
// The rules, applied in one pass from left to right with a few bytes of
// state (so any chunking of the input would give the same result):
//   - CSI (ESC [ or U+009B, then parameters, intermediates and a final
//     byte) is removed. A byte that cannot belong to it ends it early and
//     is kept.
//   - OSC (ESC ] or U+009D) and the other string sequences (ESC P, X, ^,
//     _, or U+0090, U+0098, U+009E, U+009F) are removed up to their
//     terminator, BEL, ESC \ or U+009C. A newline ends them too and is
//     kept: a stray ESC ] must not swallow the rest of the output.
//   - Any other ESC is removed with what follows it when that forms a
//     two-byte or character-set sequence (ESC 7, ESC ( B); else alone.
//   - The other C1 controls (U+0080–U+009F), BEL, BS, VT, FF and DEL are
//     removed: a backspace or a cursor move would let a command hide
//     text from whoever reads the result on a terminal. Tab and newline
//     stay.
//   - A carriage return that is followed by anything but a newline or
//     another carriage return drops what its line held so far: the text
//     after the last one is the line's last state. "\r\n" (and "\r\r\n")
//     is a plain line end and stays "\r\n"; a trailing "\r" is dropped.
//
// The output is never longer than the input unless the input holds
// invalid UTF-8 (each run of invalid bytes becomes three bytes).
func cleanText(s string) string {
	if !needsCleaning(s) {
		return s
	}
	var c cleaner
	c.out = make([]byte, 0, len(s))
	c.clean(s)
	return string(c.out)
}

// removed are the ASCII bytes the cleaner changes: ESC and CR start its
// rules, and BEL, BS, VT, FF and DEL go.
var removed = [utf8.RuneSelf]bool{0x07: true, 0x08: true, 0x0b: true, 0x0c: true, 0x0d: true, 0x1b: true, 0x7f: true}

// needsCleaning reports whether cleanText would change s: it holds one
// of the bytes in removed, a C1 control or invalid UTF-8. Text that needs
// nothing is the common case: a few vectorised scans find that sooner
// than a loop over its bytes.
func needsCleaning(s string) bool {
	for _, b := range [...]byte{0x1b, '\r', 0x07, 0x08, 0x0b, 0x0c, 0x7f} {
		if strings.IndexByte(s, b) >= 0 {
			return true
		}
	}
	for i := strings.IndexByte(s, 0xc2); i >= 0; {
		if i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
			return true
		}
		j := strings.IndexByte(s[i+1:], 0xc2)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return !utf8.ValidString(s)
}

type escState uint8

const (
	plain           escState = iota
	esc                      // after ESC
	escIntermediate          // ESC followed by 0x20–0x2F, waiting for the final byte
	csi                      // inside ESC [ …
	str                      // inside ESC ] … (or another string sequence)
	strEsc                   // ESC seen inside a string sequence
)

type cleaner struct {
	out       []byte
	state     escState
	lineStart int  // where the current line starts in out
	pendingCR bool // a "\r" whose meaning the next byte decides
	invalid   bool // the previous input bytes were invalid UTF-8
}

func (c *cleaner) clean(s string) {
	for i := 0; i < len(s); {
		b := s[i]
		switch c.state {
		case esc:
			switch {
			case b == '[':
				c.state = csi
			case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
				c.state = str
			case b >= 0x20 && b <= 0x2f:
				c.state = escIntermediate
			case b >= 0x30 && b <= 0x7e:
				c.state = plain
			default: // not a sequence: the ESC goes alone
				c.state = plain
				continue
			}
			i++
			continue
		case escIntermediate:
			if b >= 0x20 && b <= 0x2f {
				i++
				continue
			}
			c.state = plain
			if b >= 0x30 && b <= 0x7e {
				i++
			}
			continue
		case csi:
			if b >= 0x20 && b <= 0x3f {
				i++
				continue
			}
			c.state = plain
			if b >= 0x40 && b <= 0x7e {
				i++
			}
			continue
		case str:
			switch b {
			case 0x07:
				c.state = plain
			case 0x1b:
				c.state = strEsc
			case '\n':
				c.state = plain
				continue
			case 0xc2: // U+009C (ST) ends the string
				if i+1 < len(s) && s[i+1] == 0x9c {
					c.state = plain
					i++
				}
			}
			i++
			continue
		case strEsc: // ESC \ ends the string; another ESC starts a sequence
			if b == '\\' {
				c.state = plain
				i++
			} else {
				c.state = esc
			}
			continue
		}
		// plain
		switch {
		case b == 0x1b:
			c.state = esc
			c.invalid = false
			i++
			continue
		case b == '\r':
			c.pendingCR = true
			c.invalid = false
			i++
			continue
		case b < utf8.RuneSelf && removed[b] && b != '\n':
			c.invalid = false // BEL, BS, VT, FF, DEL
			i++
			continue
		case b == '\n':
			if c.pendingCR {
				c.out = append(c.out, '\r')
			}
			c.pendingCR = false
			c.invalid = false
			c.out = append(c.out, '\n')
			c.lineStart = len(c.out)
			i++
			continue
		}
		if b == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
			// A C1 control: like the ESC sequence it stands for, or
			// removed alone.
			switch s[i+1] {
			case 0x9b: // CSI
				c.state = csi
			case 0x9d, 0x90, 0x98, 0x9e, 0x9f: // OSC, DCS, SOS, PM, APC
				c.state = str
			}
			c.invalid = false
			i += 2
			continue
		}
		if c.pendingCR {
			c.out = c.out[:c.lineStart]
			c.pendingCR = false
		}
		if b < utf8.RuneSelf {
			c.invalid = false
			c.out = append(c.out, b)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			if !c.invalid {
				c.out = utf8.AppendRune(c.out, utf8.RuneError)
			}
			c.invalid = true
			i++
			continue
		}
		c.invalid = false
		i += n
		c.out = append(c.out, s[i-n:i]...)
	}
}
