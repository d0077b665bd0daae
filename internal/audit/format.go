package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/conch-dev/conch/ops"
)

// Format renders an audit line for a person, on one line:
//
//	2026-07-01 12:00:00.123 #7 s1 call bash: ls -la (in /srv/app)
//
// the time (UTC, to the millisecond), the seq, the owner, the event and
// its facts. Control characters, line breaks and bidi controls in values
// are shown escaped (\n, \x1b, \u202e), so that a command cannot draw on
// the reader's terminal. A line that is not an audit line is shown as
// "? " and the line, escaped.
func Format(line []byte) string {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	var h struct {
		Time  string `json:"time"`
		Seq   uint64 `json:"seq"`
		Owner string `json:"owner"`
	}
	e, err := ops.Unmarshal(line)
	if err != nil || json.Unmarshal(line, &h) != nil {
		return "? " + escape(string(line))
	}
	var b strings.Builder
	if t, err := time.Parse(time.RFC3339Nano, h.Time); err == nil {
		b.WriteString(t.UTC().Format("2006-01-02 15:04:05.000"))
	} else {
		b.WriteString(escape(h.Time))
	}
	fmt.Fprintf(&b, " #%d %s %s ", h.Seq, escape(h.Owner), e.EventKind())
	b.WriteString(describe(e))
	return b.String()
}

// describe is an event's facts in words.
func describe(e ops.Event) string {
	q := escape
	var b strings.Builder
	switch e := e.(type) {
	case ops.Call:
		b.WriteString(q(e.Tool))
		if e.Task != "" {
			b.WriteString(" " + q(e.Task))
		}
		if e.Command != "" {
			b.WriteString(": " + q(e.Command))
		}
		if e.Workdir != "" {
			b.WriteString(" (in " + q(e.Workdir) + ")")
		}
		if e.Host != "" {
			b.WriteString(" on " + q(e.Host))
		}
		if e.TTY {
			b.WriteString(" [tty]")
		}
		if e.Background {
			b.WriteString(" [background]")
		}
	case ops.Decision:
		b.WriteString(q(e.Decision))
		if e.Rule != "" {
			b.WriteString(" by rule " + q(e.Rule))
		}
		if e.Reason != "" {
			b.WriteString(" (" + q(e.Reason) + ")")
		}
		if e.Command != "" {
			b.WriteString(": " + q(e.Command))
		}
	case ops.Question:
		b.WriteString(q(e.Kind))
		if e.Subject != "" {
			b.WriteString(": " + q(e.Subject))
		}
		if e.Reason != "" {
			b.WriteString(" (" + q(e.Reason) + ")")
		}
	case ops.Answer:
		fmt.Fprintf(&b, "%s: %s by %s", q(e.Kind), q(e.Choice), q(e.AnsweredBy))
	case ops.Grant:
		fmt.Fprintf(&b, "%s: %s", q(e.Kind), q(e.Subject))
		if e.Scope != "" {
			b.WriteString(" for " + q(e.Scope))
		}
	case ops.Denied:
		b.WriteString(q(e.Op))
		if e.Path != "" {
			b.WriteString(" " + q(e.Path))
		}
		if e.Destination != "" {
			b.WriteString(" " + q(e.Destination))
		}
		if e.Reason != "" {
			b.WriteString(": " + q(e.Reason))
		}
		if e.Task != "" {
			b.WriteString(" [" + q(e.Task) + "]")
		}
		if e.Host != "" {
			b.WriteString(" on " + q(e.Host))
		}
	case ops.Process:
		if e.Task != "" {
			b.WriteString(q(e.Task) + " ")
		}
		if e.Signal != "" {
			b.WriteString("signal " + q(e.Signal))
		} else {
			b.WriteString("exit code " + strconv.Itoa(e.ExitCode))
		}
		if e.TimedOut {
			b.WriteString(", timed out")
		}
		fmt.Fprintf(&b, " after %s, %d bytes of output", e.Duration, e.OutputBytes)
		if e.Host != "" {
			b.WriteString(" on " + q(e.Host))
		}
	case ops.Kill:
		b.WriteString(q(e.Task))
		if e.Reason != "" {
			b.WriteString(": " + q(e.Reason))
		}
		if e.Processes > 0 {
			fmt.Fprintf(&b, ", %d processes", e.Processes)
		}
		if e.Host != "" {
			b.WriteString(" on " + q(e.Host))
		}
	}
	return b.String()
}

// escape shows control characters, line breaks, bidi and other invisible
// format characters, and invalid UTF-8 as escapes.
func escape(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r < 0x20 || r == 0x7f || unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// Tail returns the last n lines of the log at path, oldest first,
// reaching into its rotated files when the live one holds fewer.
func Tail(path string, n int) ([][]byte, error) {
	lines, _, err := TailAt(path, n)
	return lines, err
}

// Mark is a place in the log: a file of its set (by inode, so a rotation
// does not move it) and an offset in it. The zero Mark is the live
// file's end.
type Mark struct {
	ino uint64
	off int64
}

// TailAt is Tail, and the Mark where its lines end, for FollowFrom to
// carry on from there: a line written between the two is neither lost nor
// printed twice, even when the log rotates between them. A last line not
// yet ended by its newline (being written) is left to FollowFrom.
func TailAt(path string, n int) (lines [][]byte, end Mark, err error) {
	set, err := Set(path)
	if err != nil {
		return nil, Mark{}, err
	}
	if len(set) == 0 {
		return nil, Mark{}, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
	}
	var out [][]byte
	for i := len(set) - 1; i >= 0 && (len(out) < n || i == len(set)-1); i-- {
		lines, at, err := lastLines(set[i], n-len(out))
		if err != nil {
			return nil, Mark{}, err
		}
		if i == len(set)-1 {
			end = at
		}
		out = append(lines, out...)
	}
	return out, end, nil
}

// lastLines returns the last n lines of a file (none when n is 0) that
// its newline ends, and the Mark where those lines end.
func lastLines(name string, n int) ([][]byte, Mark, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, Mark{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, Mark{}, err
	}
	var ring [][]byte
	at := Mark{ino: inode(fi)}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return ring, at, nil
		}
		if err != nil {
			return nil, Mark{}, fmt.Errorf("read %s: %w", name, err)
		}
		at.off += int64(len(line))
		if n > 0 {
			ring = append(ring, line)
			if len(ring) > n {
				ring = ring[1:]
			}
		}
	}
}

// Follow hands each every line appended to the log at path from its
// current end until ctx is done (then it returns nil) or each fails (then
// it returns each's error), following the log across rotations. It looks
// for new lines every poll.
func Follow(ctx context.Context, path string, poll time.Duration, each func(line []byte) error) error {
	return FollowFrom(ctx, path, Mark{}, poll, each)
}

// FollowFrom is Follow from the Mark from (TailAt's end), or from the live
// file's end when from is the zero Mark. When the file from names has
// since been rotated away and removed, it starts at the oldest file left.
func FollowFrom(ctx context.Context, path string, from Mark, poll time.Duration, each func(line []byte) error) error {
	name, off, whence := path, from.off, io.SeekStart
	if from == (Mark{}) {
		whence = io.SeekEnd
	} else {
		name, off = fileOf(path, from)
	}
	f, err := os.Open(name)
	for wait := time.Now().Add(time.Second); from == (Mark{}) && errors.Is(err, fs.ErrNotExist) && time.Now().Before(wait); {
		// The live file between a rotation's rename and its new file:
		// it is back within a moment (a log that does not exist is
		// still an error, after that moment).
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		f, err = os.Open(name)
	}
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	if _, err := f.Seek(off, whence); err != nil {
		return err
	}
	var pending []byte
	drained := false // f was read to its end after its rotation was seen
	buf := make([]byte, 64<<10)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		n, err := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				if err := each(pending[:i+1]); err != nil {
					return err
				}
				pending = pending[i+1:]
			}
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %s: %w", path, err)
		}
		// At the end: a rotation shows as another file at path. The
		// file after this one in the set comes next (more than one
		// may have been rotated since the last look), once this one is
		// read to its end again: what was written to it between the
		// read above and the rotation is still to read, and nothing is
		// written to it after.
		if cur, err1 := f.Stat(); err1 == nil {
			if fi, err2 := os.Stat(path); err2 == nil && inode(fi) != inode(cur) {
				if !drained {
					drained = true
					continue
				}
				if nf := openNext(path, inode(cur)); nf != nil {
					f.Close()
					f, pending, drained = nf, nil, false
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// openNext opens the file of the log at path that follows the one with
// inode ino, once that one is rotated; nil when it cannot yet.
//
// That file is fixed from then on, not its name: when it is the live
// file, another rotation may rename it between the look and the open,
// and path then opens the file after it, skipping its lines. The name is
// looked up again after the open, and the file kept only if it still
// names what was opened.
func openNext(path string, ino uint64) *os.File {
	name := nextInSet(path, ino)
	if beforeNextOpen != nil {
		beforeNextOpen()
	}
	nf, err := os.Open(name)
	if err != nil {
		return nil
	}
	opened, err1 := nf.Stat()
	named, err2 := os.Stat(nextInSet(path, ino))
	if err1 != nil || err2 != nil || inode(opened) != inode(named) {
		nf.Close()
		return nil
	}
	return nf
}

// beforeNextOpen, when set (by a test), runs in openNext between its
// look at the set and its open: the moment another rotation can come.
var beforeNextOpen func()

// fileOf is the file of the log at path that m names, and the offset to
// start at in it: m's own, or 0 in the oldest file left when m's file is
// gone.
func fileOf(path string, m Mark) (string, int64) {
	set, err := Set(path)
	if err != nil || len(set) == 0 {
		return path, m.off
	}
	for _, name := range set {
		if fi, err := os.Stat(name); err == nil && inode(fi) == m.ino {
			return name, m.off
		}
	}
	return set[0], 0
}

// nextInSet is the file of the log at path that follows the one with
// inode ino: a rotated file, or path itself.
func nextInSet(path string, ino uint64) string {
	set, err := Set(path)
	if err != nil {
		return path
	}
	for i, name := range set[:max(len(set)-1, 0)] {
		if fi, err := os.Stat(name); err == nil && inode(fi) == ino {
			return set[i+1]
		}
	}
	return path
}
