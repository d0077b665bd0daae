//go:build linux

package contained_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
)

// BenchmarkRunTrueVsBare alternates Run("true") of a contained executor
// with a bare exec.Command("bash", "-c", "true").Run() and reports both
// and their ratio (target: at most 1.25).
//
//	go test -run '^$' -bench . -benchtime 2000x ./shell/contained/
func BenchmarkRunTrueVsBare(b *testing.B) {
	ex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, initOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	spec, _ := ex.Resolve(shell.Request{Command: "true"})
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
