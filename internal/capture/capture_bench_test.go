package capture

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The benchmarks compare capture with a bare io.Copy of the same source
// in the same run, so a noisy machine does not lie. The "ratio" metric is
// capture's throughput over the bare copy's (1 means free; the goal is at
// least 0.8), from the total times; "best-ratio" compares the fastest
// run of each, which shrugs off a neighbour's burst. Try:
//
//	go test ./internal/capture/ -run '^$' -bench Ratio -benchtime 10x
//	go test ./internal/capture/ -run '^$' -bench Ratio -benchtime 3x -capture.benchbytes 1073741824
//
// Sources: "mem" is an in-memory reader with only Read (io.Copy to
// io.Discard then reads 8 KiB at a time into a buffer that never leaves
// the L1 cache, which no capture that keeps 64000 bytes can match); "pipe"
// is a real pipe fed by another goroutine, as a command's output is;
// "bytes" is a bytes.Reader, an io.WriterTo.
var benchBytes = flag.Int64("capture.benchbytes", 256<<20, "bytes per benchmark iteration")

type source struct {
	name string
	open func(b *testing.B) (r io.Reader, wait func())
}

var sources = []source{
	{"mem", func(*testing.B) (io.Reader, func()) { return benchReader(), func() {} }},
	{"pipe", pipeSource},
	{"bytes", func(*testing.B) (io.Reader, func()) { return bytes.NewReader(benchData()), func() {} }},
}

// benchReader is a repeatReader of benchBytes.
func benchReader() *repeatReader {
	return &repeatReader{pattern: benchPattern(), left: *benchBytes}
}

var benchPattern = sync.OnceValue(func() []byte { return pattern(1 << 20) })

var benchData = sync.OnceValue(func() []byte {
	b := make([]byte, 0, *benchBytes)
	for int64(len(b)) < *benchBytes {
		b = append(b, benchPattern()[:min(1<<20, *benchBytes-int64(len(b)))]...)
	}
	return b
})

// pipeSource feeds benchBytes into a pipe from another goroutine.
func pipeSource(b *testing.B) (io.Reader, func()) {
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer pw.Close()
		io.Copy(pw, benchReader())
	})
	return pr, func() { wg.Wait(); pr.Close() }
}

func bareDiscard(b *testing.B, src source) {
	r, wait := src.open(b)
	io.Copy(io.Discard, r)
	wait()
}

func streamDiscard(b *testing.B, src source) {
	r, wait := src.open(b)
	s := NewStream(nil, "stdout", 64000, 1)
	if n, _ := s.ReadFrom(r); n != *benchBytes {
		b.Fatalf("ReadFrom read %d bytes", n)
	}
	s.Close()
	wait()
}

func bareFile(b *testing.B, src source) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "bare"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	r, wait := src.open(b)
	if _, err := io.Copy(f, r); err != nil {
		b.Fatal(err)
	}
	wait()
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	os.Remove(f.Name())
}

func streamSpill(b *testing.B, src source) {
	d := NewDir(b.TempDir(), 1<<40)
	s := NewStream(d, "stdout", 64000, 1<<40)
	r, wait := src.open(b)
	s.ReadFrom(r)
	wait()
	s.Close()
	if s.Output().SpillPath == "" {
		b.Fatalf("no spill: %v", s.SpillErr())
	}
	d.Close()
}

func BenchmarkBareDiscard(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		for b.Loop() {
			bareDiscard(b, src)
		}
	})
}

func BenchmarkStreamDiscard(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		for b.Loop() {
			streamDiscard(b, src)
		}
	})
}

func BenchmarkBareFile(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		for b.Loop() {
			bareFile(b, src)
		}
	})
}

func BenchmarkStreamSpill(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		for b.Loop() {
			streamSpill(b, src)
		}
	})
}

// BenchmarkStreamDefaultSpill has the default caps: 64 MiB go to disk,
// then the spill is deleted and the rest is kept as a tail only.
func BenchmarkStreamDefaultSpill(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		for b.Loop() {
			d := NewDir(b.TempDir(), 1<<30)
			s := NewStream(d, "stdout", 64000, 64<<20)
			r, wait := src.open(b)
			s.ReadFrom(r)
			wait()
			s.Close()
			d.Close()
		}
	})
}

// BenchmarkRatioDiscard: capture without a spill against io.Copy to
// io.Discard.
// (A bytes.Reader is left out: io.Copy hands it to io.Discard in one
// call that does nothing, so there is nothing to compare against.)
func BenchmarkRatioDiscard(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) {
		if src.name == "bytes" {
			b.Skip("nothing to compare against")
		}
		ratio(b, src, bareDiscard, streamDiscard)
	})
}

// BenchmarkRatioFile: capture spilling the whole stream against io.Copy
// to a file in the same directory.
func BenchmarkRatioFile(b *testing.B) {
	eachSource(b, func(b *testing.B, src source) { ratio(b, src, bareFile, streamSpill) })
}

func eachSource(b *testing.B, f func(*testing.B, source)) {
	benchData() // not on anyone's clock
	for _, src := range sources {
		b.Run(src.name, func(b *testing.B) {
			b.SetBytes(*benchBytes)
			f(b, src)
		})
	}
}

// ratio runs bare and capture in turn, swapping which goes first each
// iteration so that neither always pays for the other's aftermath (dirty
// pages being written back, a cold cache). ns/op counts both.
func ratio(b *testing.B, src source, bare, capture func(*testing.B, source)) {
	b.SetBytes(2 * *benchBytes)
	var total, best [2]time.Duration
	run := func(i int, f func(*testing.B, source)) {
		start := time.Now()
		f(b, src)
		d := time.Since(start)
		total[i] += d
		if best[i] == 0 || d < best[i] {
			best[i] = d
		}
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			run(0, bare)
			run(1, capture)
		} else {
			run(1, capture)
			run(0, bare)
		}
	}
	b.ReportMetric(float64(total[0])/float64(total[1]), "ratio")
	b.ReportMetric(float64(best[0])/float64(best[1]), "best-ratio")
}
