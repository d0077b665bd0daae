package capture

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/shell"
)

// writeChunked writes data to s in random chunks, through Write or
// ReadFrom.
func writeChunked(t *testing.T, s *Stream, data []byte, rng *rand.Rand, viaReadFrom bool) {
	t.Helper()
	if viaReadFrom {
		n, err := s.ReadFrom(&chunkReader{data: data, rng: rng})
		if err != nil || n != int64(len(data)) {
			t.Fatalf("ReadFrom = %d, %v; want %d, nil", n, err, len(data))
		}
		return
	}
	for len(data) > 0 {
		k := min(len(data), 1+rng.IntN(3*len(data)/2+1))
		n, err := s.Write(data[:k])
		if n != k || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, k)
		}
		data = data[k:]
	}
}

// chunkReader hands out data in random short reads, like a pipe.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), len(r.data), 1+r.rng.IntN(len(p)))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

func TestExactCapIsNotTruncated(t *testing.T) {
	for _, viaReadFrom := range []bool{false, true} {
		d := newTestDir(t, 1<<30)
		s := NewStream(d, "stdout", 100, 1<<20)
		data := pattern(100)
		for i := range data {
			data[i] = 'a' + data[i]%26
		}
		writeChunked(t, s, data, rand.New(rand.NewPCG(1, 2)), viaReadFrom)
		if got := s.SpillPath(); got != "" {
			t.Errorf("SpillPath() = %q before overflow", got)
		}
		s.Close()
		want := shell.Output{Text: string(data), Size: 100}
		if diff := cmp.Diff(want, s.Output()); diff != "" {
			t.Errorf("Output() mismatch (-want +got):\n%s", diff)
		}
		if d.Path() != "" || len(spillFiles(t, d)) != 0 {
			t.Errorf("a stream of exactly maxBytes created spill files: dir %q %v", d.Path(), spillFiles(t, d))
		}
		if s.Len() != 100 {
			t.Errorf("Len() = %d, want 100", s.Len())
		}
		if err := s.SpillErr(); err != nil {
			t.Errorf("SpillErr() = %v", err)
		}
	}
}

var spillName = regexp.MustCompile(`^[0-9a-f]{32}-(stdout|stderr)$`)

func TestOneByteOverCapSpillsWholeStream(t *testing.T) {
	for _, viaReadFrom := range []bool{false, true} {
		d := newTestDir(t, 1<<30)
		s := NewStream(d, "stderr", 100, 1<<20)
		data := pattern(101)
		writeChunked(t, s, data, rand.New(rand.NewPCG(3, 4)), viaReadFrom)
		live := s.SpillPath()
		if live == "" {
			t.Fatal("SpillPath() empty after overflow")
		}
		if got := s.Output(); !got.Truncated || got.SpillPath != "" {
			t.Errorf("Output() before Close = {Truncated:%v SpillPath:%q}, want truncated without a path", got.Truncated, got.SpillPath)
		}
		s.Close()
		out := s.Output()
		if !out.Truncated {
			t.Error("Output().Truncated = false for maxBytes+1 bytes")
		}
		if out.SpillPath != live {
			t.Errorf("Output().SpillPath = %q, want %q", out.SpillPath, live)
		}
		if got := mustRead(t, out.SpillPath); !bytes.Equal(got, data) {
			t.Errorf("spill file holds %d bytes, want the whole stream of %d", len(got), len(data))
		}
		if !bytes.Equal(s.rawTail(), data[1:]) {
			t.Error("raw tail is not the last 100 bytes")
		}
		if dir := filepath.Dir(out.SpillPath); dir != d.Path() {
			t.Errorf("spill file in %q, want %q", dir, d.Path())
		}
		if base := filepath.Base(out.SpillPath); !spillName.MatchString(base) || !strings.HasSuffix(base, "-stderr") {
			t.Errorf("spill file name %q, want 32 hex digits then -stderr", base)
		}
		if m := mode(t, out.SpillPath); m != 0o600 {
			t.Errorf("spill file mode %v, want 0600", m)
		}
		if m := mode(t, d.Path()); m != 0o700 {
			t.Errorf("spill dir mode %v, want 0700", m)
		}
		if !strings.HasPrefix(filepath.Base(d.Path()), "conch-spill-") {
			t.Errorf("spill dir %q, want conch-spill-*", d.Path())
		}
		if got := d.usedBytes(); got != 101 {
			t.Errorf("budget in use %d, want 101", got)
		}
	}
}

func TestTailIsByteExactUnderRandomChunking(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := pattern(3 << 20)
	for _, maxBytes := range []int{1, 2, 3, 7, 4096, 64000, 65536, 65537, 200000} {
		for _, viaReadFrom := range []bool{false, true} {
			s := NewStream(nil, "stdout", maxBytes, 1)
			n := rng.IntN(len(data))
			writeChunked(t, s, data[:n], rng, viaReadFrom)
			if got, want := s.rawTail(), tail(data[:n], maxBytes); !bytes.Equal(got, want) {
				t.Fatalf("maxBytes %d, %d bytes, ReadFrom %v: tail differs", maxBytes, n, viaReadFrom)
			}
			if s.Len() != int64(n) {
				t.Fatalf("Len() = %d, want %d", s.Len(), n)
			}
		}
	}
}

func TestHugeSingleWrite(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := NewStream(d, "stdout", 1000, 1<<30)
	data := pattern(5 << 20)
	s.Write(data[:10])
	s.Write(data[10:])
	s.Close()
	out := s.Output()
	if !bytes.Equal(s.rawTail(), tail(data, 1000)) {
		t.Error("tail differs after a write larger than the tail")
	}
	if !bytes.Equal(mustRead(t, out.SpillPath), data) {
		t.Error("spill file differs from the stream")
	}
}

func TestWriteAfterCloseIsDropped(t *testing.T) {
	s := NewStream(nil, "stdout", 10, 1)
	s.Write([]byte("abc"))
	s.Close()
	s.Close()
	if n, err := s.Write([]byte("def")); n != 3 || err != nil {
		t.Errorf("Write after Close = %d, %v; want 3, nil", n, err)
	}
	if n, err := s.ReadFrom(strings.NewReader("ghi")); n != 3 || err != nil {
		t.Errorf("ReadFrom after Close = %d, %v; want 3, nil (drained)", n, err)
	}
	if got := s.Output().Text; got != "abc" {
		t.Errorf("Output().Text = %q, want %q", got, "abc")
	}
	if s.Len() != 3 {
		t.Errorf("Len() = %d, want 3", s.Len())
	}
}

func TestReadFromReturnsReadError(t *testing.T) {
	boom := errors.New("boom")
	s := NewStream(nil, "stdout", 10, 1)
	n, err := s.ReadFrom(io.MultiReader(strings.NewReader("hello"), iotest.ErrReader(boom)))
	if n != 5 || !errors.Is(err, boom) {
		t.Errorf("ReadFrom = %d, %v; want 5, boom", n, err)
	}
	n, err = s.ReadFrom(iotest.DataErrReader(strings.NewReader("!")))
	if n != 1 || err != nil {
		t.Errorf("ReadFrom = %d, %v; want 1, nil", n, err)
	}
	if got := s.Output().Text; got != "hello!" {
		t.Errorf("Output().Text = %q", got)
	}
}

// io.Copy and os/exec hand the pipe to ReadFrom.
func TestIOCopyUsesReadFrom(t *testing.T) {
	var _ io.ReaderFrom = (*Stream)(nil)
	s := NewStream(nil, "stdout", 4, 1)
	if _, err := io.Copy(s, strings.NewReader("abcdef")); err != nil {
		t.Fatal(err)
	}
	if got := s.Output(); got.Text != "cdef" || !got.Truncated {
		t.Errorf("Output() = %+v", got)
	}
}

func TestNilDirNeverSpills(t *testing.T) {
	s := NewStream(nil, "stdout", 2, 1<<20)
	s.Write([]byte("abc"))
	s.Close()
	if out := s.Output(); out.SpillPath != "" || !out.Truncated {
		t.Errorf("Output() = %+v", out)
	}
	if !errors.Is(s.SpillErr(), ErrNoDir) {
		t.Errorf("SpillErr() = %v, want ErrNoDir", s.SpillErr())
	}
}

func TestConstructorsRefuseBadArguments(t *testing.T) {
	for name, f := range map[string]func(){
		"zero budget":   func() { NewDir("", 0) },
		"zero maxBytes": func() { NewStream(nil, "stdout", 0, 1) },
		"zero maxSpill": func() { NewStream(nil, "stdout", 1, 0) },
		"huge maxBytes": func() { NewStream(nil, "stdout", int(^uint(0)>>1), 1) },
		"empty name":    func() { NewStream(nil, "", 1, 1) },
		"slash in name": func() { NewStream(nil, "../x", 1, 1) },
		"dot dot":       func() { NewStream(nil, "..", 1, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestTailDropsCharacterCutAtItsStart(t *testing.T) {
	s := NewStream(nil, "stdout", 10, 1)
	s.Write([]byte("€abcdefgh")) // € is E2 82 AC: the tail starts at 82
	s.Close()
	if got := s.Output(); got.Text != "abcdefgh" || !got.Truncated {
		t.Errorf("Output() = %+v, want Text %q truncated", got, "abcdefgh")
	}
	// A 4-byte character cut after its first byte loses all three
	// continuation bytes.
	s = NewStream(nil, "stdout", 5, 1)
	s.Write([]byte("x😀ab")) // 😀 is F0 9F 98 80
	if got := s.Output().Text; got != "ab" {
		t.Errorf("Output().Text = %q, want %q", got, "ab")
	}
	// Nothing is cut when the stream fits, so a stray continuation byte
	// at its start is replaced, not dropped.
	s = NewStream(nil, "stdout", 10, 1)
	s.Write([]byte("\x82ab"))
	if got := s.Output().Text; got != "\uFFFDab" {
		t.Errorf("Output().Text = %q, want %q", got, "\uFFFDab")
	}
}

func TestBinaryGarbageGivesValidUTF8(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		s := NewStream(nil, "stdout", 1+rng.IntN(300), 1)
		data := pattern(rng.IntN(1000))
		rng.Shuffle(len(data), func(i, j int) { data[i], data[j] = data[j], data[i] })
		writeChunked(t, s, data, rng, rng.IntN(2) == 0)
		for _, txt := range []string{s.Output().Text, first(s.Next())} {
			if !utf8.ValidString(txt) {
				t.Fatalf("invalid UTF-8: %q", txt)
			}
			if len(txt) > 2*len(data) {
				t.Fatalf("%d bytes of text from %d bytes", len(txt), len(data))
			}
		}
	}
	s := NewStream(nil, "stdout", 100, 1)
	s.Write([]byte("a\x00b\x1b[31mc\xff\xfed"))
	if got, want := s.Output().Text, "a\x00b\x1b[31mc\uFFFDd"; got != want {
		t.Errorf("Output().Text = %q, want %q (NUL and controls kept, a run of bad bytes is one U+FFFD)", got, want)
	}
}

func first(s string, _ shell.Omission) string { return s }

// next is Next with a lossy flag, as the older tests read it.
func next(s *Stream) (string, bool) {
	text, skipped := s.Next()
	return text, skipped.Bytes > 0
}

// Memory must not depend on how much a command prints, nor on its line
// structure.
func TestMemoryIsBounded(t *testing.T) {
	const total = 100 << 20
	for _, tc := range []struct {
		name string
		fill byte
	}{
		{"single line", 'x'},
		{"carriage returns", '\r'},
		{"newlines", '\n'},
	} {
		for _, viaReadFrom := range []bool{false, true} {
			d := newTestDir(t, 1<<30)
			s := NewStream(d, "stdout", 64000, 1<<20)
			chunk := bytes.Repeat([]byte{tc.fill}, 32<<10)
			r := &repeatReader{pattern: chunk, left: total}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if viaReadFrom {
				s.ReadFrom(r)
			} else {
				for w := 0; w < total; w += len(chunk) {
					s.Write(chunk)
				}
			}
			text, lossy := next(s)
			s.Close()
			out := s.Output()
			runtime.ReadMemStats(&after)
			if s.Len() != total {
				t.Fatalf("Len() = %d, want %d", s.Len(), total)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("%s, ReadFrom %v: allocated %d bytes for 100 MB of output", tc.name, viaReadFrom, grew)
			}
			if len(out.Text) != 64000 || !out.Truncated || out.SpillPath != "" || !lossy || len(text) != 64000 {
				t.Errorf("%s: Output() has %d bytes, truncated %v, path %q; Next %d bytes, lossy %v",
					tc.name, len(out.Text), out.Truncated, out.SpillPath, len(text), lossy)
			}
			if _, ok := s.SpillErr().(*shell.SpillCapError); !ok || len(spillFiles(t, d)) != 0 {
				t.Errorf("%s: SpillErr() = %v, files %v", tc.name, s.SpillErr(), spillFiles(t, d))
			}
		}
	}
}

// repeatReader reads pattern over and over until left bytes are read. It
// has only Read, so io.Copy cannot take a shortcut around a buffer.
type repeatReader struct {
	pattern []byte
	off     int
	left    int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n := 0
	for n < len(p) {
		k := copy(p[n:], r.pattern[r.off:])
		n += k
		r.off = (r.off + k) % len(r.pattern)
	}
	r.left -= int64(n)
	return n, nil
}

func TestWriteDoesNotAllocate(t *testing.T) {
	p := pattern(4096)
	for _, spill := range []bool{false, true} {
		d := newTestDir(t, 1<<40)
		s := NewStream(d, "stdout", 64000, 1<<40)
		if !spill {
			s = NewStream(nil, "stdout", 64000, 1)
		}
		for range 100 { // grow the ring and start the spill
			s.Write(p)
		}
		if spill && s.SpillPath() == "" {
			t.Fatal("no spill")
		}
		if n := testing.AllocsPerRun(200, func() { s.Write(p) }); n != 0 {
			t.Errorf("spill %v: Write allocates %v times", spill, n)
		}
		s.Close()
	}
}

func TestNextIsIncrementalAndConsuming(t *testing.T) {
	s := NewStream(nil, "stdout", 10, 1)
	check := func(wantText string, wantLossy bool) {
		t.Helper()
		if text, lossy := next(s); text != wantText || lossy != wantLossy {
			t.Errorf("Next() = %q, %v; want %q, %v", text, lossy, wantText, wantLossy)
		}
	}
	check("", false)
	s.Write([]byte("abc"))
	check("abc", false)
	check("", false)
	s.Write([]byte("de"))
	s.Write([]byte("f"))
	check("def", false)
	s.Write([]byte("0123456")) // 13 bytes so far; all the unread ones are in the tail
	check("0123456", false)
	s.Write([]byte("789ABCDEFGHIJ")) // unread bytes 789 are gone
	check("ABCDEFGHIJ", true)
	check("", false)
	s.Write([]byte("KLMNOPQRSTU")) // 11 new bytes, one of them (K) dropped
	check("LMNOPQRSTU", true)
	s.Close()
	check("", false)
	check("", false)
}

func TestNextHoldsBackSplitCharacter(t *testing.T) {
	s := NewStream(nil, "stdout", 100, 1)
	check := func(wantText string) {
		t.Helper()
		if text, lossy := next(s); text != wantText || lossy {
			t.Errorf("Next() = %q, %v; want %q, false", text, lossy, wantText)
		}
	}
	s.Write([]byte("a\xe2\x82"))
	check("a")
	check("")
	s.Write([]byte("\xac"))
	check("€")
	s.Write([]byte("\xf0"))
	check("")
	s.Write([]byte("\x9f\x98"))
	check("")
	s.Write([]byte("\x80b\xe2"))
	check("😀b")
	// An impossible continuation is not held back: it will never
	// complete.
	s.Write([]byte("\x82\xac\xe0\x80")) // E0 80 is never valid
	check("€\uFFFD")
	s.Write([]byte("c\xe2"))
	check("c")
	s.Close() // the stream ends mid-character
	check("\uFFFD")
	check("")
}

func TestLossyNextCleansTheTail(t *testing.T) {
	s := NewStream(nil, "stdout", 5, 1)
	s.Write([]byte("€€€")) // the tail is 82 AC E2 82 AC
	if text, lossy := next(s); text != "€" || !lossy {
		t.Errorf("Next() = %q, %v; want %q, true", text, lossy, "€")
	}
	s.Write([]byte("xy€\xe2\x82")) // 7 new bytes: x and y dropped, then € and a partial one
	if text, lossy := next(s); text != "€" || !lossy {
		t.Errorf("Next() = %q, %v; want %q, true", text, lossy, "€")
	}
	s.Write([]byte("\xac"))
	if text, lossy := next(s); text != "€" || lossy {
		t.Errorf("Next() = %q, %v; want %q, false", text, lossy, "€")
	}
}

// Readers run while the writer copies a real pipe; -race checks the
// reads against ReadFrom's unlocked reads into the ring.
func TestConcurrentReadersWhileCopying(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := newStream(d, "stdout", 1000, 1<<30, 256)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(strings.Repeat("héllo wörld €😀 ", 20000))
	var wg sync.WaitGroup
	wg.Go(func() {
		defer pw.Close()
		rng := rand.New(rand.NewPCG(9, 10))
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(700))
			pw.Write(rest[:k])
			rest = rest[k:]
		}
	})
	done := make(chan struct{})
	var got strings.Builder
	var anyLossy bool
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			text, lossy := next(s)
			anyLossy = anyLossy || lossy
			if !utf8.ValidString(text) {
				t.Errorf("Next() gave invalid UTF-8")
			}
			got.WriteString(text)
			if !utf8.ValidString(s.Output().Text) {
				t.Errorf("Output() gave invalid UTF-8")
			}
			s.SpillPath()
			s.Len()
			runtime.Gosched()
		}
	})
	if _, err := s.ReadFrom(pr); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	s.Close()
	close(done)
	wg.Wait()
	text, lossy := next(s)
	anyLossy = anyLossy || lossy
	got.WriteString(text)
	if !anyLossy && got.String() != string(data) {
		t.Error("reads without a loss do not add up to the stream")
	}
	if !bytes.Equal(mustRead(t, s.Output().SpillPath), data) {
		t.Error("spill file differs from the stream")
	}
}

// A stream closed and read to its end lets go of its memory; its spill
// file and its facts stay.
func TestReleaseAfterReadToEnd(t *testing.T) {
	d := newTestDir(t, 1<<30)
	s := NewStream(d, "stdout", 64000, 1<<20)
	data := bytes.Repeat([]byte("0123456789abcde\n"), 8192) // 128 KiB
	s.Write(data)
	if text, skipped := s.Next(); len(text) != 64000 || skipped.Bytes != int64(len(data)-64000) || s.buf == nil {
		t.Fatalf("Next of a running stream: %d bytes, skipped %+v, ring released %v", len(text), skipped, s.buf == nil)
	}
	s.Close()
	if s.buf == nil {
		t.Fatal("released on Close, before the reader read to the end")
	}
	if text, _ := s.Next(); text != "" || s.buf != nil || s.head != nil {
		t.Fatalf("the last Next: %q; ring %d bytes, head %d bytes after it", text, len(s.buf), len(s.head))
	}
	if text, skipped := s.Next(); text != "" || skipped != (shell.Omission{}) {
		t.Errorf("Next after release = %q, %+v", text, skipped)
	}
	// A follower behind the end gets nothing (the bytes are gone), not a
	// panic on the empty ring.
	if text, next, skipped := s.Since(0); text != "" || next != int64(len(data)) || skipped != int64(len(data)) {
		t.Errorf("Since(0) after release = %q, %d, %d", text, next, skipped)
	}
	out := s.Output()
	if out.Text != "" || out.Head != "" || !out.Truncated || out.Size != int64(len(data)) || out.Lines != 8192 || out.SpillPath == "" || out.SpillErr != nil {
		t.Errorf("Output after release = %+v", out)
	}
	if b, err := os.ReadFile(out.SpillPath); err != nil || !bytes.Equal(b, data) {
		t.Errorf("spill file after release: %d bytes, %v", len(b), err)
	}
}

func TestSinceDoesNotConsume(t *testing.T) {
	s := NewStream(nil, "stdout", 10, 1)
	check := func(off int64, wantText string, wantNext, wantSkipped int64) {
		t.Helper()
		if text, next, skipped := s.Since(off); text != wantText || next != wantNext || skipped != wantSkipped {
			t.Errorf("Since(%d) = %q, %d, %d; want %q, %d, %d", off, text, next, skipped, wantText, wantNext, wantSkipped)
		}
	}
	check(0, "", 0, 0)
	s.Write([]byte("abc"))
	check(0, "abc", 3, 0)
	check(1, "bc", 3, 0)
	check(3, "", 3, 0)
	s.Write([]byte("é"[:1])) // a split character is held back
	check(3, "", 3, 0)
	s.Write([]byte("é"[1:]))
	check(3, "é", 5, 0)
	s.Write([]byte("0123456789")) // 15 bytes; the tail holds the last 10
	check(2, "0123456789", 15, 3)
	// Next still returns everything it had not returned.
	if text, skipped := s.Next(); text != "0123456789" || skipped.Bytes != 5 {
		t.Errorf("Next after Since = %q, skipped %+v", text, skipped)
	}
	check(14, "9", 15, 0)
	s.Write([]byte{0xe2, 0x82})
	s.Close() // a character cut by the end of the stream is not held back
	check(15, "\uFFFD", 17, 0)
}
