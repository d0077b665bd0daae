package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Set returns the files of the log at path in chain order: its rotated
// files ("<path>.<first seq>"), oldest first, then path itself if it
// exists.
func Set(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type rotated struct {
		name string
		seq  uint64
	}
	var rs []rotated
	for _, e := range ents {
		if seq, ok := rotatedSeq(base, e.Name()); ok {
			rs = append(rs, rotated{e.Name(), seq})
		}
	}
	slices.SortFunc(rs, func(a, b rotated) int {
		if a.seq != b.seq {
			if a.seq < b.seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	var set []string
	for _, r := range rs {
		set = append(set, filepath.Join(dir, r.name))
	}
	if _, err := os.Stat(path); err == nil {
		set = append(set, path)
	}
	return set, nil
}

// rotatedSeq reports whether name is a rotated file of base
// ("<base>.<seq>", or "<base>.<seq>-<n>" after a clash) and its seq.
func rotatedSeq(base, name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return 0, false
	}
	rest, _, _ = strings.Cut(rest, "-")
	seq, err := strconv.ParseUint(rest, 10, 64)
	return seq, err == nil && seq > 0
}

// lineSeq reads the seq of an audit line from its start, which the
// writer always puts second (`{"time":"…","seq":N,`); it works on a cut
// line too.
func lineSeq(line []byte) (uint64, bool) {
	const key = `"seq":`
	i := bytes.Index(line[:min(len(line), 80)], []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(key):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n == len(rest) || (rest[n] != ',' && rest[n] != '}') {
		return 0, false
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	return seq, err == nil && seq > 0
}

// Problem is one thing Verify found wrong, named by the seq of the line
// it concerns.
type Problem struct {
	Seq uint64
	// What is "altered", "removed", "reordered", "duplicated" or
	// "truncated".
	What string
	// Detail says where and how: the file and line number, and what
	// showed it.
	Detail string
}

func (p Problem) String() string { return fmt.Sprintf("seq %d: %s (%s)", p.Seq, p.What, p.Detail) }

// Report is what Verify found.
type Report struct {
	Files []string
	Lines int
	// First and Last are the lowest and highest seq read.
	First, Last uint64
	// Partial is set when the set starts at a rotated file whose name
	// says where it starts, after seq 1: the files before it are not
	// there to verify.
	Partial  bool
	Problems []Problem
}

// OK reports whether the chain holds.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// entry is what Verify keeps of a line.
type entry struct {
	seq       uint64
	prev      string
	hash      string
	file      string
	line      int
	parsed    bool // a whole audit line
	truncated bool // cut short: the file ends inside it, or it is the start of a line
}

func (e entry) where() string { return fmt.Sprintf("%s line %d", filepath.Base(e.file), e.line) }

// header is what Verify reads of a line.
type header struct {
	Time  *string `json:"time"`
	Seq   *uint64 `json:"seq"`
	Prev  *string `json:"prev"`
	Event *string `json:"event"`
}

// ParseLine reads the header of an audit line: its seq and prev. It fails
// on anything that is not one JSON object with a string time, a positive
// seq, a prev of "" or 64 hex digits, and a string event.
func ParseLine(line []byte) (seq uint64, prev string, err error) {
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return 0, "", err
	}
	switch {
	case h.Time == nil || h.Seq == nil || h.Prev == nil || h.Event == nil:
		return 0, "", errors.New("time, seq, prev or event missing")
	case *h.Seq == 0:
		return 0, "", errors.New("seq 0")
	case *h.Prev != "" && !isHash(*h.Prev):
		return 0, "", errors.New("prev is not a SHA-256")
	}
	return *h.Seq, *h.Prev, nil
}

// cutShort reports whether a ParseLine error says the line is the start
// of a JSON value that ends too soon.
func cutShort(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Offset > 0 && strings.Contains(se.Error(), "unexpected end of JSON input")
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// Verify checks the chain of the log at path and its rotated files (Set):
// every line is a whole audit line, the seqs run from 1 (or from the seq
// a rotated first file is named after) without a gap, a repeat or a step
// back, and each line's prev is the hash of the line before it in the
// chain. Each problem is named by a seq: a line changed in place is
// "altered" (found by the next line's prev; the last line of the set has
// no next line, so a change there that keeps it an audit line is not
// found), a missing line "removed", a line out of its place "reordered",
// a line whose seq is there twice "duplicated", and a last line without
// its newline "truncated". The error is for files that cannot be read.
func Verify(path string) (*Report, error) {
	set, err := Set(path)
	if err != nil {
		return nil, err
	}
	if len(set) == 0 {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
	}
	return VerifyFiles(set)
}

// VerifyFiles is Verify of the given files, in chain order.
func VerifyFiles(files []string) (*Report, error) {
	r := &Report{Files: files}
	var entries []entry
	for _, name := range files {
		es, err := readEntries(name)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
	}
	r.Lines = len(entries)
	// A line that is not an audit line takes the seq after the one
	// before it, so that the chain is checked past it.
	var last uint64
	for i := range entries {
		if !entries[i].parsed {
			entries[i].seq = last + 1
		}
		last = entries[i].seq
	}
	var problems []Problem
	add := func(seq uint64, what, detail string) {
		problems = append(problems, Problem{seq, what, detail})
	}

	bySeq := map[uint64]int{}
	for i, e := range entries {
		if r.First == 0 || e.seq < r.First {
			r.First = e.seq
		}
		r.Last = max(r.Last, e.seq)
		switch {
		case e.truncated:
			add(e.seq, "truncated", e.where()+": the line ends before its JSON does")
		case !e.parsed:
			add(e.seq, "altered", e.where()+": not a whole audit line")
		}
		if j, dup := bySeq[e.seq]; dup {
			if e.parsed && entries[j].parsed {
				add(e.seq, "duplicated", fmt.Sprintf("%s and %s", entries[j].where(), e.where()))
			}
			continue
		}
		bySeq[e.seq] = i
	}
	if len(entries) == 0 {
		return r, nil
	}

	// Where the chain starts: at seq 1, or at the seq a rotated first
	// file is named after.
	start := uint64(1)
	if s, ok := firstFileSeq(files); ok && s > 1 {
		start, r.Partial = s, true
	}
	for s := start; s < r.Last; s++ {
		if _, ok := bySeq[s]; ok {
			continue
		}
		to := s
		for to+1 < r.Last {
			if _, ok := bySeq[to+1]; ok {
				break
			}
			to++
		}
		if to == s {
			add(s, "removed", "no line has this seq")
		} else {
			add(s, "removed", fmt.Sprintf("no line has seq %d to %d", s, to))
		}
		s = to
	}

	for i := 1; i < len(entries); i++ {
		if entries[i].seq < entries[i-1].seq {
			add(entries[i].seq, "reordered", fmt.Sprintf("%s comes after seq %d", entries[i].where(), entries[i-1].seq))
		}
	}

	// The chain: each line's prev is the hash of the line with the seq
	// before it. A break at seq s means that line s-1 changed, unless
	// the chain breaks at s+1 as well: then s itself changed (its prev
	// included).
	breaks := func(s uint64) bool {
		i, ok := bySeq[s]
		if !ok || !entries[i].parsed {
			return false
		}
		if s == start {
			return s == 1 && entries[i].prev != ""
		}
		j, ok := bySeq[s-1]
		return ok && entries[i].prev != entries[j].hash
	}
	altered := map[uint64]bool{}
	for _, e := range entries {
		if !e.parsed || !breaks(e.seq) {
			continue
		}
		s := e.seq - 1
		if e.seq == start || breaks(e.seq+1) {
			s = e.seq
		}
		if altered[s] {
			continue
		}
		altered[s] = true
		if i, ok := bySeq[s]; ok && entries[i].parsed {
			add(s, "altered", entries[i].where()+": its hash is not the prev of the line after it")
		}
	}
	if s, ok := firstFileSeq(files); ok && len(entries) > 0 && entries[0].parsed && entries[0].seq != s {
		add(s, "removed", fmt.Sprintf("%s is named after seq %d but starts at seq %d", filepath.Base(files[0]), s, entries[0].seq))
	}

	slices.SortStableFunc(problems, func(a, b Problem) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	r.Problems = problems
	return r, nil
}

// firstFileSeq is the seq the first file of a set is named after, when it
// is a rotated file.
func firstFileSeq(files []string) (uint64, bool) {
	if len(files) == 0 {
		return 0, false
	}
	name := filepath.Base(files[0])
	i := strings.LastIndex(name, ".")
	if i < 0 {
		return 0, false
	}
	return rotatedSeq(name[:i], name)
}

// readEntries reads the lines of one file.
func readEntries(name string) ([]entry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var es []entry
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return es, nil
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		e := entry{file: name, line: n}
		body, complete := bytes.CutSuffix(line, []byte{'\n'})
		e.hash = hashLine(body)
		s, p, perr := ParseLine(body)
		switch {
		case perr == nil && complete:
			e.seq, e.prev, e.parsed = s, p, true
		case !complete, cutShort(perr):
			e.truncated = true
		}
		es = append(es, e)
		if err == io.EOF {
			return es, nil
		}
	}
}
