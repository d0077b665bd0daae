package tools

import (
	"strings"
	"unicode/utf8"
)

// cleanText is s as a model should read it: terminal escape sequences
// removed, a line rewritten with carriage returns reduced to its last
// state, invalid UTF-8 replaced with U+FFFD. Text that needs none of it
// is returned as is, without a copy.
//
// The rules, applied in one pass from left to right with a few bytes of
// state (so any chunking of the input would give the same result):
//   - CSI (ESC [ parameters intermediates final) is removed. A byte that
//     cannot belong to it ends it early and is kept.
//   - OSC (ESC ]) and the other string sequences (ESC P, X, ^, _) are
//     removed up to their terminator, BEL or ESC \. A newline ends them
//     too and is kept: a stray ESC ] must not swallow the rest of the
//     output.
//   - Any other ESC is removed with what follows it when that forms a
//     two-byte or character-set sequence (ESC 7, ESC ( B); else alone.
//   - A carriage return that is followed by anything but a newline or
//     another carriage return drops what its line held so far: the text
//     after the last one is the line's last state. "\r\n" (and "\r\r\n")
//     is a plain line end and stays "\r\n"; a trailing "\r" is dropped.
//
// The output is never longer than the input unless the input holds
// invalid UTF-8 (each run of invalid bytes becomes three bytes).
func cleanText(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 && strings.IndexByte(s, '\r') < 0 && utf8.ValidString(s) {
		return s
	}
	var c cleaner
	c.out = make([]byte, 0, len(s))
	c.clean(s)
	return string(c.out)
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
		c.out = append(c.out, s[i:i+n]...)
		i += n
	}
}
