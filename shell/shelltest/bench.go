//go:build linux

package shelltest

import (
	"context"
	"os/exec"
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
