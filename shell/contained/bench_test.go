//go:build linux

package contained_test

import (
	"testing"

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
