//go:build linux

package local_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// The benchmarks compare conch with a bare exec of the same command in the
// same run and report the ratio, so a noisy machine does not lie.
//
//	go test -run '^$' -bench . -benchtime 2000x ./shell/local/

func benchExec(b *testing.B, o *local.Options) *local.Executor {
	b.Helper()
	if o == nil {
		o = &local.Options{}
	}
	o.SpillParent = b.TempDir()
	ex, err := local.New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	return ex
}

// BenchmarkRunTrueVsBare compares Run("true") with a bare spawn of the
// same command (target: at most 1.10).
func BenchmarkRunTrueVsBare(b *testing.B) {
	shelltest.BenchRunVsBare(b, benchExec(b, nil))
}

const gib = 1 << 30

// rssSampler records the peak resident set size of this process while it
// runs.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			if r := vmRSS(); r > s.peak.Load() {
				s.peak.Store(r)
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) Stop() int64 { close(s.stop); <-s.done; return s.peak.Load() }

const gibCmd = "head -c 1073741824 /dev/zero"

// BenchmarkThroughputTail pushes 1 GiB through Run with the default caps
// (the spill stops at 64 MiB, the rest is tail only) against the bare
// command copied to io.Discard (target: at least 0.8x the bare
// throughput, at most 32 MiB of extra RSS).
func BenchmarkThroughputTail(b *testing.B) {
	ex := benchExec(b, nil)
	throughput(b, ex, func() error {
		cmd := exec.Command("bash", "-c", gibCmd)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return err
		}
		io.Copy(io.Discard, out)
		return cmd.Wait()
	})
}

// BenchmarkThroughputSpill is the same with a spill cap above 1 GiB,
// against the bare command copied to a file on the same disk.
func BenchmarkThroughputSpill(b *testing.B) {
	ex := benchExec(b, &local.Options{MaxSpillBytes: 2 * gib, SpillBudget: 4 * gib})
	dir := b.TempDir()
	throughput(b, ex, func() error {
		f, err := os.Create(filepath.Join(dir, "bare"))
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		cmd := exec.Command("bash", "-c", gibCmd)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return err
		}
		io.Copy(onlyWriter{f}, out)
		return cmd.Wait()
	})
}

// onlyWriter hides *os.File's ReadFrom, so the bare copy moves bytes
// through user space like the capture does, not by splice.
type onlyWriter struct{ io.Writer }

func throughput(b *testing.B, ex *local.Executor, bare func() error) {
	spec, _ := ex.Resolve(shell.Request{Command: gibCmd, Timeout: 10 * time.Minute})
	base := vmRSS()
	var conch, raw time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		s := sampleRSS()
		t0 := time.Now()
		res, err := shell.Run(context.Background(), ex, spec)
		conch += time.Since(t0)
		peak = max(peak, s.Stop())
		if err != nil || !res.Stdout.Truncated {
			b.Fatalf("run: %v %+v", err, res.Stdout.Truncated)
		}
		t1 := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(t1)
	}
	b.SetBytes(gib)
	b.ReportMetric(float64(gib)*float64(b.N)/conch.Seconds()/(1<<20), "conch-MiB/s")
	b.ReportMetric(float64(gib)*float64(b.N)/raw.Seconds()/(1<<20), "bare-MiB/s")
	b.ReportMetric(raw.Seconds()/conch.Seconds(), "throughput-ratio")
	b.ReportMetric(float64(peak-base)/(1<<20), "extra-RSS-MiB")
}

// BenchmarkKillLatency measures how long after Kill the whole group is
// gone: a cooperative command (target 50 ms) and one that ignores SIGTERM
// (target grace + 50 ms).
func BenchmarkKillLatency(b *testing.B) {
	const grace = 200 * time.Millisecond
	ex := benchExec(b, &local.Options{Grace: grace})
	for _, tc := range []struct{ name, cmd string }{
		{"cooperative", "echo up; sleep 600 & sleep 600"},
		{"ignores-TERM", "trap '' TERM; echo up; sleep 600"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var worst, total time.Duration
			for i := 0; i < b.N; i++ {
				spec, _ := ex.Resolve(shell.Request{Command: tc.cmd})
				p, err := ex.Start(spec)
				if err != nil {
					b.Fatal(err)
				}
				for p.Read().Stdout == "" {
					time.Sleep(time.Millisecond)
				}
				t0 := time.Now()
				p.Kill()
				<-p.Done()
				d := time.Since(t0)
				total += d
				worst = max(worst, d)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/kill")
			b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
		})
	}
}
