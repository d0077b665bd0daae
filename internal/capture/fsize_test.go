//go:build linux

package capture

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

type helperReport struct {
	Text, SpillPath, SpillErr string
	Truncated                 bool
	Files                     int
	Used                      int64
}

// runHelper runs in a child of the test binary: it caps the size of any
// file this process writes at 1000 bytes, so the spill file fails
// mid-stream the way it does on a full disk.
func runHelper(name string) int {
	if name != "fsize" {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
		return 2
	}
	signal.Ignore(syscall.SIGXFSZ) // get EFBIG instead of dying
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1000, Max: 1000}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d := NewDir(os.Getenv("CAPTURE_TEST_DIR"), 1<<30)
	defer d.Close()
	s := NewStream(d, "stdout", 100, 1<<30)
	for range 50 {
		s.Write([]byte(strings.Repeat("x", 99) + "\n"))
	}
	s.Close()
	out := s.Output()
	ents, _ := os.ReadDir(d.Path())
	rep := helperReport{out.Text, out.SpillPath, fmt.Sprint(s.SpillErr()), out.Truncated, len(ents), d.usedBytes()}
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

func TestSpillWriteErrorCostsOnlyTheFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=fsize", "CAPTURE_TEST_DIR="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var rep helperReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if want := strings.Repeat("x", 99) + "\n"; rep.Text != want || !rep.Truncated {
		t.Errorf("tail %q (truncated %v), want %q", rep.Text, rep.Truncated, want)
	}
	if rep.SpillPath != "" || rep.Files != 0 || rep.Used != 0 {
		t.Errorf("after a failed spill write: path %q, %d files, %d bytes in use", rep.SpillPath, rep.Files, rep.Used)
	}
	if !strings.Contains(rep.SpillErr, "spill: write") || !strings.Contains(rep.SpillErr, "file too large") {
		t.Errorf("SpillErr() = %q", rep.SpillErr)
	}
}
