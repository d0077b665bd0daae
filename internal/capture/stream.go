// Package capture keeps bounded, byte-exact output tails with spill files and consuming reads.
//
// A model sees only the end of a command's output, and a command may
// print gigabytes, a single 100 MB line, or binary garbage. So memory
// holds a fixed-size tail whatever comes, the whole stream goes to a
// private file only once the tail has overflowed (so the common small
// command touches no disk), and text is repaired into valid UTF-8 only
// when it is read, because the bytes must stay exact for the spill file
// and for the next read. Capturing sits on the child's pipe, so it never
// fails a write: a full disk or a budget costs the spill file, never the
// command.
package capture

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/conch-dev/conch/shell"
)

const (
	// readChunk is ReadFrom's largest read, and the slack the ring keeps
	// beyond the tail so that ReadFrom can read straight into the ring
	// while readers look at the tail: one copy per byte, like io.Copy.
	readChunk = 64 << 10
	// minRead is ReadFrom's first read; reads double from there, so a
	// command that prints "ok" does not cost a 64 KiB buffer.
	minRead = 4 << 10
	// minAlloc is the ring's first allocation.
	minAlloc = 512
)

// MaxTail is the largest tail a Stream keeps (its maxBytes); NewStream
// panics above it, so callers refuse larger settings up front.
const MaxTail = math.MaxInt / 4

type spillState uint8

const (
	spillNone   spillState = iota // no overflow yet
	spillActive                   // overflowed; the file holds the stream so far
	spillDone                     // the stream closed and so did the file, cleanly
	spillFailed                   // no file, for good; err says why
)

// Stream captures one output stream (stdout or stderr) of one process. It
// is safe for one writing goroutine (Write, ReadFrom) and any number of
// reading ones (Output, Next, SpillPath, Len); Close may come from any
// goroutine, even while ReadFrom is blocked in a read.
type Stream struct {
	dir      *Dir
	name     string
	maxBytes int
	maxSpill int64
	chunk    int // readChunk; smaller in tests so that rings wrap often
	ringSize int // len(buf) once the ring is full grown
	headMax  int // shell.HeadBytes; smaller in tests

	mu     sync.Mutex
	buf    []byte // stream offset o lives at buf[o % len(buf)]
	head   []byte // the stream's first bytes, up to headMax
	total  int64  // bytes accepted
	cursor int64  // where Next resumes
	closed bool
	// released: closed and read to its end, so buf and head are gone.
	released bool
	// Newline counts: in the whole stream, and before the cursor. Each
	// byte is counted once as it is accepted; the tail's newlines are
	// counted again only by a lossy Next, which needs what lies before
	// the tail (lines minus the tail's).
	lines, cursorLines int64
	state              spillState
	spill              *spillFile
	err                error // why the spill failed
	trash              []byte
	// The binary probe (binary.go): control bytes among the first
	// BinaryProbe, and the decision once it was made.
	controls        int64
	decided, binary bool
}

// NewStream returns a stream that keeps its last maxBytes bytes in memory
// and, once it has more than that, the whole stream in a file of dir
// unless the stream grows past maxSpill bytes. A nil dir disables spill
// files. name ("stdout" or "stderr") ends the file's name. NewStream
// panics if maxBytes or maxSpill is not positive or name is not a plain
// file name.
func NewStream(dir *Dir, name string, maxBytes int, maxSpill int64) *Stream {
	return newStream(dir, name, maxBytes, maxSpill, readChunk)
}

func newStream(dir *Dir, name string, maxBytes int, maxSpill int64, chunk int) *Stream {
	if maxBytes <= 0 || maxSpill <= 0 {
		panic(fmt.Sprintf("capture: maxBytes and maxSpill must be positive, got %d and %d", maxBytes, maxSpill))
	}
	if maxBytes > MaxTail {
		panic(fmt.Sprintf("capture: maxBytes %d is too large", maxBytes))
	}
	checkName(name)
	s := &Stream{
		dir:      dir,
		name:     name,
		maxBytes: maxBytes,
		maxSpill: maxSpill,
		chunk:    chunk,
		ringSize: (maxBytes+chunk-1)/chunk*chunk + chunk,
		headMax:  shell.HeadBytes,
	}
	if dir == nil {
		s.state, s.err = spillFailed, ErrNoDir
	}
	return s
}

// Write captures p. It always returns len(p), nil: the stream sits on a
// child's pipe, and a capture problem must not become a broken pipe.
// Bytes written after Close are dropped.
func (s *Stream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return len(p), nil
	}
	newTotal := s.total + int64(len(p))
	if s.state == spillNone || s.state == spillActive {
		// Spill before the ring forgets: the first spill needs the
		// bytes the ring still holds.
		s.spillLocked(newTotal, p)
	}
	s.countLocked(p)
	keep := p
	if len(keep) > s.maxBytes {
		keep = keep[len(keep)-s.maxBytes:]
	}
	s.growLocked(newTotal)
	s.copyInLocked(newTotal-int64(len(keep)), keep)
	s.total = newTotal
	s.decideLocked()
	return len(p), nil
}

// ReadFrom copies r into the stream until r reports EOF or an error. It
// reads straight into the ring, so each byte is copied once, or, like
// io.Copy, lets r write itself when r is an io.WriterTo (an in-memory
// reader then costs one copy of the tail). It returns the bytes read and
// r's error other than io.EOF; like Write, it never fails on its own
// account, and after Close it keeps draining r so the child does not
// block on a full pipe.
func (s *Stream) ReadFrom(r io.Reader) (int64, error) {
	if wt, ok := r.(io.WriterTo); ok {
		// An *os.File comes back through io.Copy to ReadFrom, without
		// its WriteTo.
		return wt.WriteTo(s)
	}
	var n int64
	for {
		region := s.regionForRead()
		k, err := r.Read(region)
		if k > 0 {
			s.commit(region[:k])
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// regionForRead returns where the next read may land: the part of the
// ring just past the tail, which no reader looks at.
func (s *Stream) regionForRead() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := s.chunk
	if s.total < int64(want) {
		want = max(int(s.total), min(minRead, s.chunk))
	}
	if s.closed {
		if len(s.trash) < s.chunk {
			s.trash = make([]byte, s.chunk)
		}
		return s.trash
	}
	s.growLocked(s.total + int64(want))
	pos := int(s.total % int64(len(s.buf)))
	return s.buf[pos:min(pos+want, len(s.buf))]
}

// commit accepts the bytes ReadFrom just read into region, which is the
// ring right after the tail (or the trash buffer after Close).
func (s *Stream) commit(region []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	newTotal := s.total + int64(len(region))
	if s.state == spillNone || s.state == spillActive {
		s.spillLocked(newTotal, region)
	}
	s.countLocked(region)
	s.total = newTotal
	s.decideLocked()
}

// countLocked accounts for p, the bytes that take the stream from s.total
// on: the head keeps its share, and p's newlines are counted.
func (s *Stream) countLocked(p []byte) {
	s.probeLocked(p)
	if len(s.head) < s.headMax {
		s.head = append(s.head, p[:min(len(p), s.headMax-len(s.head))]...)
	}
	s.lines += int64(bytes.Count(p, newline))
}

var newline = []byte{'\n'}

// newlinesLocked counts the newlines in stream bytes [from, to), which
// the ring holds.
func (s *Stream) newlinesLocked(from, to int64) int64 {
	if from >= to {
		return 0
	}
	pos := int(from % int64(len(s.buf)))
	end := pos + int(to-from)
	if end <= len(s.buf) {
		return int64(bytes.Count(s.buf[pos:end], newline))
	}
	return int64(bytes.Count(s.buf[pos:], newline) + bytes.Count(s.buf[:end-len(s.buf)], newline))
}

// spillLocked writes data, the bytes that take the stream from s.total to
// newTotal, to the spill file, creating the file on the first overflow.
func (s *Stream) spillLocked(newTotal int64, data []byte) {
	if s.state == spillNone {
		if newTotal <= int64(s.maxBytes) || !s.openSpillLocked(newTotal) {
			return
		}
	} else {
		if newTotal > s.maxSpill {
			s.failSpillLocked(ErrSpillTooLarge)
			return
		}
		if err := s.dir.reserve(s.spill, int64(len(data))); err != nil {
			s.failSpillLocked(err)
			return
		}
	}
	if _, err := s.spill.f.Write(data); err != nil {
		s.failSpillLocked(fmt.Errorf("spill: write %s: %w", s.spill.path, err))
	}
}

// openSpillLocked creates the spill file for a stream that will be size
// bytes long and writes the stream so far into it; false when there is
// none (the stream is past its cap, the file could not be made or
// written). Nothing has overflowed before, so the ring has never
// wrapped: the stream so far is buf[:total].
func (s *Stream) openSpillLocked(size int64) bool {
	if size > s.maxSpill {
		s.state, s.err = spillFailed, ErrSpillTooLarge
		return false
	}
	sp, err := s.dir.create(s.name, size)
	if err != nil {
		s.state, s.err = spillFailed, err
		return false
	}
	s.spill, s.state = sp, spillActive
	if _, err := sp.f.Write(s.buf[:s.total]); err != nil {
		s.failSpillLocked(fmt.Errorf("spill: write %s: %w", sp.path, err))
		return false
	}
	return true
}

// failSpillLocked gives up on the spill file for good. A file a model
// cannot trust to be whole is worse than none, so it is deleted.
func (s *Stream) failSpillLocked(err error) {
	if gone := s.dir.drop(s.spill); gone != nil {
		err = gone // the Dir got there first; its reason is the real one
	}
	s.spill.f.Close()
	s.state, s.err = spillFailed, err
}

// growLocked makes room in buf for the stream up to offset need without
// wrapping over bytes the tail still holds. Before the ring is full grown
// the stream sits at buf[:total], so growing is a plain copy.
func (s *Stream) growLocked(need int64) {
	if len(s.buf) == s.ringSize || need <= int64(len(s.buf)) {
		return
	}
	n := s.ringSize
	if need < int64(n) {
		n = min(n, max(2*len(s.buf), int(need), minAlloc))
	}
	buf := make([]byte, n)
	copy(buf, s.buf[:s.total])
	s.buf = buf
}

func (s *Stream) copyInLocked(off int64, b []byte) {
	for len(b) > 0 {
		n := copy(s.buf[off%int64(len(s.buf)):], b)
		b = b[n:]
		off += int64(n)
	}
}

// Close ends the stream: later writes are dropped, the spill file (if
// any) is closed, and Next releases a held-back partial character.
// Close is idempotent.
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.decideLocked()
	if s.state != spillActive {
		return
	}
	if err := s.spill.f.Close(); err != nil {
		s.failSpillLocked(fmt.Errorf("spill: close %s: %w", s.spill.path, err))
		return
	}
	if err := s.dir.finish(s.spill); err != nil {
		s.state, s.err = spillFailed, err
		return
	}
	s.state = spillDone
}

// Output returns the tail as valid UTF-8, and the facts about the whole
// stream (see shell.Output). SpillPath is set only when the stream
// overflowed, is closed, and its file is complete and still exists: a path
// handed to a model must hold the whole stream; SpillErr then says why
// there is none (a *shell.SpillCapError past the spill cap). Head, for a
// stream that outgrew its tail, is its first bytes up to shell.HeadBytes,
// but never any byte the tail holds, so that Size minus both is what lies
// between; a character cut at its end is dropped.
//
// Once the stream is released (closed and read to its end by Next), its
// bytes are no longer held: Text and Head are then empty, and every other
// field is as before.
func (s *Stream) Output() shell.Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo := s.total - s.retainedLocked()
	truncated := s.total > int64(s.maxBytes)
	out := shell.Output{Truncated: truncated, Size: s.total, Lines: s.lines, Binary: s.binary}
	if !s.released {
		from := lo
		if truncated {
			from += s.cutLeadLocked(from)
			out.Head = headText(s.head[:min(int64(len(s.head)), lo)])
		}
		out.Text = s.textLocked(from, s.total)
	}
	if !truncated && !s.binary {
		return out
	}
	out.SpillErr = s.spillErrLocked()
	if s.state == spillDone && out.SpillErr == nil {
		switch fi, err := os.Lstat(s.spill.path); {
		case err != nil:
			out.SpillErr = fmt.Errorf("spill: %w", err)
		case !fi.Mode().IsRegular():
			out.SpillErr = fmt.Errorf("spill: %s is no longer a regular file", s.spill.path)
		default:
			out.SpillPath = s.spill.path
		}
	}
	return out
}

// headText returns b, the start of a stream, as valid UTF-8, without the
// incomplete character that b may end in.
func headText(b []byte) string {
	b = b[:len(b)-partialTail(b[max(0, len(b)-(utf8.UTFMax-1)):])]
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// Next returns the bytes written since the previous Next, as valid UTF-8.
// It is meant for one consumer. When some of those bytes had already left
// the tail, skipped measures them (bytes and newlines) and text is the
// whole tail, so nothing is repeated and the gap is visible; a read is
// lossy exactly when skipped.Bytes > 0. A character split by a write is
// held back until its end arrives or the stream closes.
//
// The Next that finds the stream closed and reads it to its end releases
// the stream's memory (see Output); later ones return "".
func (s *Stream) Next() (text string, skipped shell.Omission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return "", shell.Omission{}
	}
	from := s.cursor
	if lo := s.total - s.retainedLocked(); from < lo {
		// The lead bytes cut are continuation bytes, never newlines.
		cut := lo + s.cutLeadLocked(lo)
		linesBefore := s.lines - s.newlinesLocked(lo, s.total)
		skipped = shell.Omission{Bytes: cut - from, Lines: linesBefore - s.cursorLines}
		from, s.cursorLines = cut, linesBefore
	}
	to := s.total
	if !s.closed {
		to -= s.partialTailLocked(from, to)
	}
	text = s.textLocked(from, to)
	s.cursorLines += s.newlinesLocked(from, to)
	s.cursor = to
	if s.closed && to == s.total {
		s.released, s.buf, s.head, s.trash = true, nil, nil, nil
	}
	return text, skipped
}

// Since returns the bytes written from stream offset off on, as valid
// UTF-8, without moving Next's cursor, and the offset to resume from. A
// character split by a write is held back until its end arrives or the
// stream closes. skipped counts the bytes from off on that had already
// left the tail: the text then starts at the tail's first character.
func (s *Stream) Since(off int64) (text string, next, skipped int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released { // its bytes are gone; a follower past them gets none
		return "", s.total, max(0, s.total-max(off, 0))
	}
	from := min(max(off, 0), s.total)
	if lo := s.total - s.retainedLocked(); from < lo {
		from = lo + s.cutLeadLocked(lo)
	}
	to := s.total
	if !s.closed {
		to -= s.partialTailLocked(from, to)
	}
	return s.textLocked(from, to), to, from - off
}

// Peek returns the end of what Next would return now, without moving the
// cursor: at most maxBytes bytes, as valid UTF-8. When it leaves bytes
// out, it begins after the first newline within them if there is one
// before the last byte, else at a character boundary, so that it never
// starts inside a line it could show whole. A stream that lost unread
// bytes peeks into its tail like a lossy Next.
func (s *Stream) Peek(maxBytes int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := max(s.cursor, s.total-s.retainedLocked())
	to := s.total
	if !s.closed {
		to -= s.partialTailLocked(from, to)
	}
	if to-from > int64(maxBytes) {
		from = to - int64(maxBytes)
		nl := int64(-1)
		for off := from; off < to-1; off++ {
			if s.byteAtLocked(off) == '\n' {
				nl = off
				break
			}
		}
		if nl >= 0 {
			from = nl + 1
		} else {
			for from < to && !utf8.RuneStart(s.byteAtLocked(from)) {
				from++
			}
		}
	}
	return s.textLocked(from, to)
}

// SpillPath returns the spill file's path while it is safe to name: the
// stream overflowed, and the file is neither failed, past its cap,
// evicted, nor removed by Dir.Close. While the stream runs the file is
// still growing.
func (s *Stream) SpillPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.state == spillActive || s.state == spillDone) && s.dir.goneErr(s.spill) == nil {
		return s.spill.path
	}
	return ""
}

// SpillErr says why the stream has no spill file although it
// overflowed (a *shell.SpillCapError, ErrBudget, ErrEvicted, ErrDirClosed,
// ErrNoDir, or a wrapped file-system error); nil otherwise.
// Past the spill cap it is a *shell.SpillCapError.
func (s *Stream) SpillErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spillErrLocked()
}

func (s *Stream) spillErrLocked() error {
	if s.total <= int64(s.maxBytes) && !s.binary {
		return nil
	}
	if s.err == ErrSpillTooLarge {
		return &shell.SpillCapError{Cap: s.maxSpill}
	}
	if s.err != nil {
		return s.err
	}
	if s.spill != nil {
		return s.dir.goneErr(s.spill)
	}
	return nil
}

// Len returns the number of bytes written (before Close).
func (s *Stream) Len() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *Stream) retainedLocked() int64 { return min(s.total, int64(s.maxBytes)) }

func (s *Stream) byteAtLocked(off int64) byte { return s.buf[off%int64(len(s.buf))] }

// cutLeadLocked counts the continuation bytes (at most 3) at from: the
// rest of a character whose start the tail has lost.
func (s *Stream) cutLeadLocked(from int64) int64 {
	var n int64
	for n < 3 && from+n < s.total && !utf8.RuneStart(s.byteAtLocked(from+n)) {
		n++
	}
	return n
}

// partialTailLocked returns the length of an incomplete but so far valid
// character at the end of [from, to), or 0.
func (s *Stream) partialTailLocked(from, to int64) int64 {
	var last [utf8.UTFMax - 1]byte
	k := min(to-from, int64(len(last)))
	for i := range k {
		last[i] = s.byteAtLocked(to - k + i)
	}
	return int64(partialTail(last[:k]))
}

// partialTail returns the length of the incomplete character that ends b,
// if its bytes so far could still become a valid one, else 0.
func partialTail(b []byte) int {
	for i := 1; i <= len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

// textLocked returns stream bytes [from, to) as valid UTF-8, each run of
// invalid bytes replaced by one U+FFFD (so at most twice the bytes).
func (s *Stream) textLocked(from, to int64) string {
	if from >= to {
		return ""
	}
	var b strings.Builder
	b.Grow(int(to - from))
	pos := int(from % int64(len(s.buf)))
	end := pos + int(to-from)
	if end <= len(s.buf) {
		b.Write(s.buf[pos:end])
	} else {
		b.Write(s.buf[pos:])
		b.Write(s.buf[:end-len(s.buf)])
	}
	// ToValidUTF8 returns its argument when it is already valid, so
	// the common case copies once.
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// rawTail returns a copy of the bytes the ring retains, for tests.
func (s *Stream) rawTail() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]byte, 0, s.retainedLocked())
	for off := s.total - s.retainedLocked(); off < s.total; off++ {
		out = append(out, s.byteAtLocked(off))
	}
	return out
}
