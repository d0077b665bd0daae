//go:build linux && !kube

package main

import (
	"flag"
	"log/slog"
	"strings"
	"testing"
)

// TestKubeHostsNotBuilt: a conch built without the Kubernetes transport
// (the default build) refuses a Kubernetes host, saying how to build one
// that has it.
func TestKubeHostsNotBuilt(t *testing.T) {
	var cfg config
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	cfg.addFlags(fs, 0, slog.LevelInfo)
	if err := fs.Parse([]string{"--host-kubernetes", "k=dev/box"}); err != nil {
		t.Fatal(err)
	}
	const want = "host k: this conch was built without the Kubernetes transport; build it with `go build -tags kube ./cmd/conch`"
	if _, err := cfg.build(nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("build: %v, want %q", err, want)
	}
}
