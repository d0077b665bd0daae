package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/conch-dev/conch/shell"
)

// runePrefixes holds every proper prefix of every valid UTF-8 encoding:
// the byte strings that a later byte can still complete. The model uses
// it instead of the package's own partialTail, so the two can disagree.
var runePrefixes = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		enc := utf8.AppendRune(nil, r)
		for k := 1; k < len(enc); k++ {
			m[string(enc[:k])] = true
		}
	}
	return m
})

func modelPartial(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		if runePrefixes()[string(b[len(b)-i:])] {
			return i
		}
	}
	return 0
}

// model is the obvious, unbounded implementation of a Stream.
type model struct {
	max      int
	headMax  int
	all      []byte
	cursor   int
	closed   bool
	released bool // closed and read to the end
}

func (m *model) lo() int { return len(m.all) - min(len(m.all), m.max) }

func (m *model) cutLead(from int) int {
	for n := 0; n < 3 && from < len(m.all) && m.all[from]&0xC0 == 0x80; n++ {
		from++
	}
	return from
}

func (m *model) output() shell.Output {
	from, truncated := m.lo(), len(m.all) > m.max
	out := shell.Output{Truncated: truncated, Size: int64(len(m.all)), Lines: int64(bytes.Count(m.all, []byte("\n")))}
	if m.released {
		return out
	}
	if truncated {
		head := m.all[:min(m.headMax, from)]
		head = head[:len(head)-modelPartial(head)]
		out.Head = strings.ToValidUTF8(string(head), "\uFFFD")
		from = m.cutLead(from)
	}
	out.Text = strings.ToValidUTF8(string(m.all[from:]), "\uFFFD")
	return out
}

func (m *model) next() (string, shell.Omission) {
	if m.released {
		return "", shell.Omission{}
	}
	from := m.cursor
	var skipped shell.Omission
	if from < m.lo() {
		from = m.cutLead(m.lo())
		gap := m.all[m.cursor:from]
		skipped = shell.Omission{Bytes: int64(len(gap)), Lines: int64(bytes.Count(gap, []byte("\n")))}
	}
	to := len(m.all)
	if !m.closed {
		to -= modelPartial(m.all[from:to])
	}
	m.cursor = to
	m.released = m.closed && to == len(m.all)
	return strings.ToValidUTF8(string(m.all[from:to]), "\uFFFD"), skipped
}

// harness drives a Stream and the model side by side and checks every
// promise after every step.
type harness struct {
	t        tb
	d        *Dir
	s        *Stream
	m        model
	maxSpill int64
	reads    strings.Builder // concatenated Next texts
	lossy    bool            // some read was lossy
}

func newHarness(t tb, d *Dir, maxBytes int, maxSpill int64, chunk, headMax int) *harness {
	h := &harness{
		t:        t,
		d:        d,
		s:        newStream(d, "stdout", maxBytes, maxSpill, chunk),
		m:        model{max: maxBytes, headMax: headMax},
		maxSpill: maxSpill,
	}
	h.s.headMax = headMax
	return h
}

// write feeds p through Write, or through ReadFrom with reads shaped by
// how (0: Write; 1: whole reads; 2: one byte at a time; 3: half reads;
// 4: data with the EOF; 5: an io.WriterTo).
func (h *harness) write(p []byte, how int) {
	h.t.Helper()
	if h.m.closed {
		return
	}
	var r io.Reader = struct{ io.Reader }{bytes.NewReader(p)} // no WriteTo
	switch how % 6 {
	case 0:
		if n, err := h.s.Write(p); n != len(p) || err != nil {
			h.t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
		}
		r = nil
	case 5:
		r = bytes.NewReader(p)
	case 2:
		r = iotest.OneByteReader(r)
	case 3:
		r = iotest.HalfReader(r)
	case 4:
		r = iotest.DataErrReader(r)
	}
	if r != nil {
		if n, err := h.s.ReadFrom(r); n != int64(len(p)) || err != nil {
			h.t.Fatalf("ReadFrom = %d, %v; want %d, nil", n, err, len(p))
		}
	}
	h.m.all = append(h.m.all, p...)
	h.check()
}

func (h *harness) next() {
	h.t.Helper()
	gotText, gotSkipped := h.s.Next()
	wantText, wantSkipped := h.m.next()
	if gotText != wantText || gotSkipped != wantSkipped {
		h.t.Fatalf("Next() = %q, %+v; want %q, %+v (stream %q, max %d)", gotText, gotSkipped, wantText, wantSkipped, h.m.all, h.m.max)
	}
	h.reads.WriteString(gotText)
	h.lossy = h.lossy || gotSkipped.Bytes > 0
}

func (h *harness) close() {
	h.t.Helper()
	h.s.Close()
	h.m.closed = true
	h.check()
}

// binary is whether the stream so far is binary by the rule of
// binary.go: decided once its probe is full, or at its close.
func (h *harness) binary() bool {
	all := h.m.all
	if len(all) == 0 || len(all) < BinaryProbe && !h.m.closed {
		return false
	}
	probe := all[:min(len(all), BinaryProbe)]
	n := 0
	for _, b := range probe {
		if b < 0x20 && !strings.ContainsRune("\t\n\r\x1b", rune(b)) || b == 0x7f {
			n++
		}
	}
	return n*10 > len(probe)
}

// check compares the tail, the text and the spill file with the model.
func (h *harness) check() {
	h.t.Helper()
	if h.m.released {
		if h.s.buf != nil || h.s.head != nil {
			h.t.Fatalf("a released stream holds %d ring and %d head bytes", len(h.s.buf), len(h.s.head))
		}
	} else if got, want := h.s.rawTail(), tail(h.m.all, h.m.max); !bytes.Equal(got, want) {
		h.t.Fatalf("raw tail %q, want %q", got, want)
	}
	if got := h.s.Len(); got != int64(len(h.m.all)) {
		h.t.Fatalf("Len() = %d, want %d", got, len(h.m.all))
	}
	out := h.s.Output()
	want := h.m.output()
	wantTruncated := want.Truncated
	if out.Text != want.Text || out.Truncated != want.Truncated || out.Head != want.Head || out.Size != want.Size || out.Lines != want.Lines {
		h.t.Fatalf("Output() = %+v; want %+v", out, want)
	}
	// A binary stream spills as a truncated one does (binary.go).
	binary := h.binary()
	if out.Binary != binary {
		h.t.Fatalf("Output().Binary = %v for %q (closed %v)", out.Binary, h.m.all, h.m.closed)
	}
	wantFile := wantTruncated || binary
	var cap *shell.SpillCapError
	if overCap := wantFile && int64(len(h.m.all)) > h.maxSpill; overCap != (errors.As(out.SpillErr, &cap) && cap.Cap == h.maxSpill) {
		h.t.Fatalf("Output().SpillErr = %v for %d bytes (max %d, maxSpill %d)", out.SpillErr, len(h.m.all), h.m.max, h.maxSpill)
	}
	wantErr := wantFile && int64(len(h.m.all)) > h.maxSpill || wantFile && h.m.closed && out.SpillPath == ""
	if (out.SpillErr != nil) != wantErr {
		h.t.Fatalf("Output().SpillErr = %v with SpillPath %q (truncated %v, binary %v, closed %v)", out.SpillErr, out.SpillPath, wantTruncated, binary, h.m.closed)
	}
	// A stream found binary late spills from then on, if it never
	// passed the cap before.
	shouldSpill := wantFile && int64(len(h.m.all)) <= h.maxSpill
	live := h.s.SpillPath()
	switch {
	case shouldSpill && live == "":
		h.t.Fatalf("no spill for %d bytes (max %d, maxSpill %d): %v", len(h.m.all), h.m.max, h.maxSpill, h.s.SpillErr())
	case !shouldSpill && live != "":
		h.t.Fatalf("spill %q for %d bytes (max %d, maxSpill %d)", live, len(h.m.all), h.m.max, h.maxSpill)
	case shouldSpill:
		// No buffering: the file holds every byte written so far.
		got, err := os.ReadFile(live)
		if err != nil || !bytes.Equal(got, h.m.all) {
			h.t.Fatalf("spill file holds %q (%v), want the whole stream %q", got, err, h.m.all)
		}
	}
	if h.m.closed && out.SpillPath != live || !h.m.closed && out.SpillPath != "" {
		h.t.Fatalf("Output().SpillPath = %q (closed %v), SpillPath() = %q", out.SpillPath, h.m.closed, live)
	}
	files := 0
	if live != "" {
		files = 1
	}
	if n := len(spillFiles(h.t, h.d)); n != files {
		h.t.Fatalf("%d files in the spill directory, want %d", n, files)
	}
	if got, want := h.d.usedBytes(), int64(files*len(h.m.all)); got != want {
		h.t.Fatalf("budget in use %d, want %d", got, want)
	}
}

// finish closes the stream, drains it, and checks the promises about the
// whole run.
func (h *harness) finish() {
	h.t.Helper()
	h.close()
	h.next()
	h.next()
	h.check() // a released stream
	if !h.lossy && utf8.Valid(h.m.all) && h.reads.String() != string(h.m.all) {
		h.t.Fatalf("reads without a loss add up to %q, want %q", h.reads.String(), h.m.all)
	}
}

func TestStreamProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxBytes := rapid.IntRange(1, 40).Draw(t, "maxBytes")
		chunk := rapid.IntRange(1, 24).Draw(t, "chunk")
		maxSpill := rapid.OneOf(rapid.Just(int64(1<<30)), rapid.Int64Range(1, 300)).Draw(t, "maxSpill")
		text := rapid.Bool().Draw(t, "text")
		headMax := rapid.IntRange(0, 50).Draw(t, "headMax")
		d := NewDir(tempDir(t), 1<<30)
		defer d.Close()
		h := newHarness(t, d, maxBytes, maxSpill, chunk, headMax)

		// Bytes are drawn into pending and written in prefixes cut at
		// any byte, so characters get split across writes.
		var pending []byte
		steps := rapid.IntRange(0, 40).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				if text {
					pending = append(pending, rapid.StringN(0, 20, -1).Draw(t, "text")...)
				} else {
					pending = append(pending, rapid.SliceOfN(rapid.Byte(), 0, 60).Draw(t, "bytes")...)
				}
				k := rapid.IntRange(0, len(pending)).Draw(t, "cut")
				h.write(pending[:k], rapid.IntRange(0, 5).Draw(t, "how"))
				pending = pending[k:]
			case 2:
				h.next()
			case 3:
				h.next()
				h.next()
			}
		}
		h.write(pending, 0)
		h.finish()
	})
}

// tempDir makes a directory removed when t ends; rapid.T has no TempDir.
func tempDir(t *rapid.T) string {
	dir, err := os.MkdirTemp("", "capture-test-*")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FuzzStream decodes data as a stream configuration and a list of
// operations (see the loop) and checks the same promises as
// TestStreamProperties.
func FuzzStream(f *testing.F) {
	f.Add([]byte{10, 4, 0, 0x28, 'h', 0xc3, 0xa9, 'l', 'l', 'o', 5, 0x18, 0xe2, 0x82, 0xac, 5, 6, 7})
	f.Add([]byte{3, 1, 1, 0x20, 0xf0, 0x9f, 0x98, 0x80, 5, 0x09, 'a', 5, 0x21, 0xf0, 0x9f, 0x98, 0x80, 5})
	f.Add([]byte{1, 24, 9, 0x50, 0xff, 0xfe, 0x00, '\r', '\n', 0x80, 0xbf, 0xc0, 0xc1, 0xf5, 5, 6})
	f.Add([]byte("\x07\x02\x00" + "\xf8" + strings.Repeat("€x", 15) + "\x05\x06\x07"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		maxBytes := 1 + int(data[0]%64)
		chunk := 1 + int(data[1]%32)
		maxSpill := int64(1 << 30)
		if data[2]&1 == 1 {
			maxSpill = 1 + int64(data[2]>>1)*2
		}
		d := NewDir(t.TempDir(), 1<<30)
		defer d.Close()
		h := newHarness(t, d, maxBytes, maxSpill, chunk, int(data[1]>>5)*7) // head: 0 to 49 bytes
		ops := data[3:]
		for len(ops) > 0 {
			op, n := int(ops[0]&7), int(ops[0]>>3)
			ops = ops[1:]
			switch op {
			case 5:
				h.next()
			case 6:
				h.next()
				h.next()
			case 7:
				h.check()
			default: // write the next n bytes, the way op says
				n = min(n, len(ops))
				h.write(ops[:n], op+n) // op 0-4 with n: any of the six ways
				ops = ops[n:]
			}
		}
		h.finish()
	})
}

// TestDirProperties runs several streams against one small budget: the
// budget in use always equals what is on disk and what the streams that
// name a file have written, never exceeds the budget, a named file always
// holds its whole stream, and eviction takes finished streams only, oldest
// first.
func TestDirProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		budget := rapid.Int64Range(1, 400).Draw(t, "budget")
		d := NewDir(tempDir(t), budget)
		defer d.Close()
		type entry struct {
			s        *Stream
			all      []byte
			maxSpill int64
			closed   bool
			order    int // when its spill began; 0: never
		}
		var streams []*entry
		spills := 0
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for range steps {
			had := map[*entry]bool{}
			for _, e := range streams {
				had[e] = e.s.SpillPath() != ""
			}
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op == 0 || len(streams) == 0:
				maxSpill := rapid.Int64Range(1, 300).Draw(t, "maxSpill")
				name := rapid.SampledFrom([]string{"stdout", "stderr"}).Draw(t, "name")
				streams = append(streams, &entry{
					s:        newStream(d, name, rapid.IntRange(1, 20).Draw(t, "maxBytes"), maxSpill, 8),
					maxSpill: maxSpill,
				})
			case op == 1:
				e := rapid.SampledFrom(streams).Draw(t, "close")
				e.s.Close()
				e.closed = true
			default:
				e := rapid.SampledFrom(streams).Draw(t, "write")
				p := rapid.SliceOfN(rapid.Byte(), 1, 80).Draw(t, "bytes")
				e.s.Write(p)
				if !e.closed {
					e.all = append(e.all, p...)
				}
			}
			// A spill begins with a write past the tail, or at the close
			// of a short binary stream.
			for _, e := range streams {
				if !had[e] && e.order == 0 && e.s.SpillPath() != "" {
					spills++
					e.order = spills
				}
			}

			var named int64
			for _, e := range streams {
				path := e.s.SpillPath()
				if path == "" {
					continue
				}
				named += e.s.Len()
				if got := mustRead(t, path); !bytes.Equal(got, e.all) {
					t.Fatalf("spill file holds %d bytes, want the whole stream of %d", len(got), len(e.all))
				}
			}
			for _, e := range streams {
				if !had[e] || e.s.SpillPath() != "" || !errors.Is(e.s.SpillErr(), ErrEvicted) {
					continue
				}
				if !e.closed {
					t.Fatalf("a live stream's spill was evicted")
				}
				for _, f := range streams {
					if f.closed && f.s.SpillPath() != "" && f.order < e.order {
						t.Fatalf("evicted spill #%d while #%d, older and finished, was kept", e.order, f.order)
					}
				}
			}
			if used, disk := d.usedBytes(), diskUsage(t, d); used != named || disk != named || used > budget {
				t.Fatalf("budget %d: in use %d, on disk %d, named %d", budget, used, disk, named)
			}
		}
		path := d.Path()
		if err := d.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		for _, e := range streams {
			if e.s.SpillPath() != "" {
				t.Fatalf("a path survived Dir.Close")
			}
			e.s.Close()
		}
		if d.usedBytes() != 0 || path != "" && exists(path) {
			t.Fatalf("after Close: %d bytes in use, directory exists %v", d.usedBytes(), exists(path))
		}
	})
}
