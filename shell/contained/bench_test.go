//go:build linux

package contained_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// BenchmarkRunTrueVsBare compares Run("true") of a contained executor with
// a bare spawn of the same command (target: at most 1.25).
//
//	go test -run '^$' -bench . -benchtime 2000x ./shell/contained/
func BenchmarkRunTrueVsBare(b *testing.B) {
	ex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, initOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	shelltest.BenchRunVsBare(b, ex)
}

// BenchmarkSessionStart measures a session's first command, Run("true")
// by a new owner, which starts the owner's init (New's own first init
// and the owner's spill directory are not in it), and the owner's end.
//
//	go test -run '^$' -bench SessionStart -benchtime 200x ./shell/contained/
func BenchmarkSessionStart(b *testing.B) {
	ex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, initOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	ctx := context.Background()
	var first, end time.Duration
	for i := 0; b.Loop(); i++ {
		owner := "bench-" + strconv.Itoa(i)
		spec, err := ex.Resolve(shell.Request{Command: "true", Owner: owner})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := shell.Run(ctx, ex, spec); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ex.EndOwner(owner)
		first += t1.Sub(t0)
		end += time.Since(t1)
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns/op")
	b.ReportMetric(float64(end.Nanoseconds())/float64(b.N), "end-ns/op")
}
