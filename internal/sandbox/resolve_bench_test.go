package sandbox

import (
	"os"
	"testing"
)

// BenchmarkResolve resolves a workspace-write policy for the directory in
// CONCH_BENCH_WORKSPACE (default: this repository's root), repository
// search included:
//
//	CONCH_BENCH_WORKSPACE=$HOME go test -run '^$' -bench Resolve ./internal/sandbox/
func BenchmarkResolve(b *testing.B) {
	ws := os.Getenv("CONCH_BENCH_WORKSPACE")
	if ws == "" {
		ws = "../.."
	}
	for b.Loop() {
		if _, err := (Policy{Workspace: ws, TempDirs: []string{"/tmp"}}).Resolve(); err != nil {
			b.Fatal(err)
		}
	}
}
