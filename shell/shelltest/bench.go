//go:build linux

package shelltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/shell"
)

// BenchRunVsBare alternates shell.Run of "true" on ex with a bare
// exec.Command("bash", "-c", "true").Run() and reports both and their
// ratio, so that a noisy machine does not lie about a provider's cost.
// It also times the bare spawn in a session of its own (setsid, as
// the local provider's commands run): where the kernel's autogroups are
// on, a new session is a new scheduling group, and under load a spawn's
// time depends on which group runs it
// (docs/containment.md#spawning-and-waiting; ratio-setsid: conch
// against that spawn). The three take turns going
// first, so that none always runs on the time the one before it left
// to its group.
func BenchRunVsBare(b *testing.B, ex shell.Executor) {
	spec, err := ex.Resolve(shell.Request{Command: "true"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	runs := []func() error{
		func() error { _, err := shell.Run(ctx, ex, spec); return err },
		func() error { return exec.Command("bash", "-c", "true").Run() },
		func() error {
			// Claimed: out of our process group, it is otherwise an
			// orphan the executor's reaper may take from under Wait.
			c := exec.Command("bash", "-c", "true")
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := proc.StartCmd(c); err != nil {
				return err
			}
			return proc.WaitCmd(c)
		},
	}
	var total [3]time.Duration
	for i := 0; i < b.N; i++ {
		for k := range runs {
			j := (i + k) % len(runs)
			t0 := time.Now()
			if err := runs[j](); err != nil {
				b.Fatal(err)
			}
			total[j] += time.Since(t0)
		}
	}
	conch, bare, bareSetsid := total[0], total[1], total[2]
	b.ReportMetric(float64(conch.Nanoseconds())/float64(b.N), "conch-ns/op")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(bareSetsid.Nanoseconds())/float64(b.N), "bare-setsid-ns/op")
	b.ReportMetric(float64(conch)/float64(bare), "ratio")
	b.ReportMetric(float64(conch)/float64(bareSetsid), "ratio-setsid")
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
