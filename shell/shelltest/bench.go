//go:build linux

package shelltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
)

// BenchRunVsBare alternates shell.Run of "true" on ex with a bare
// exec.Command("bash", "-c", "true").Run() and reports both and their
// ratio, so that a noisy machine does not lie about a provider's cost.
func BenchRunVsBare(b *testing.B, ex shell.Executor) {
	spec, err := ex.Resolve(shell.Request{Command: "true"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var conch, bare time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := shell.Run(ctx, ex, spec); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		conch += t1.Sub(t0)
		bare += t2.Sub(t1)
	}
	b.ReportMetric(float64(conch.Nanoseconds())/float64(b.N), "conch-ns/op")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(conch)/float64(bare), "ratio")
}

// P50s runs each of fns once per round, b.N rounds, interleaved so that
// the machine's load weighs on each alike, and returns the median of
// each one's durations, in the order of fns. An error fails b.
func P50s(b *testing.B, fns ...func() error) []time.Duration {
	d := make([][]time.Duration, len(fns))
	for range b.N {
		for i, f := range fns {
			t0 := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			d[i] = append(d[i], time.Since(t0))
		}
	}
	p := make([]time.Duration, len(fns))
	for i := range d {
		slices.Sort(d[i])
		p[i] = d[i][len(d[i])/2]
	}
	return p
}

// Echo returns a function, for P50s, that runs `echo hi` on ex and
// checks its output.
func Echo(ex shell.Executor) func() error {
	return func() error {
		spec, err := ex.Resolve(shell.Request{Command: "echo hi"})
		if err != nil {
			return err
		}
		r, err := shell.Run(context.Background(), ex, spec)
		if err == nil && r.Stdout.Text != "hi\n" {
			err = fmt.Errorf("echo hi: %+v", r)
		}
		return err
	}
}

// LoadAverage is the machine's load average over the last minute, to
// report beside a benchmark's figures (-1 when /proc cannot say).
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return -1
	}
	return l
}
