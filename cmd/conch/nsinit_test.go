//go:build linux

package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestInitSubcommand: the built binary, run as `conch __init`, is the
// init of a namespace: commands it spawns see it as pid 1.
func TestInitSubcommand(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	in, err := nsinit.Start(&nsinit.Options{Path: testutil.ConchBinary(t), Args: []string{nsinit.HelperArg}, Stderr: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ch, err := in.Spawn(nsinit.Command{
		Path:   "/bin/sh",
		Args:   []string{"sh", "-c", `tr '\0' ' ' </proc/1/cmdline; echo`},
		Env:    testutil.Env(marker),
		Dir:    "/",
		Stdout: w,
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	ws, err := ch.Wait()
	ch.Release()
	if err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("status %v, %v", ws, err)
	}
	if got, want := strings.TrimSpace(string(out)), testutil.ConchBinary(t)+" "+nsinit.HelperArg; got != want {
		t.Errorf("pid 1 inside is %q, want %q", got, want)
	}
}
