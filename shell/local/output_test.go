//go:build linux

package local_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// assertGone checks that nothing carrying marker is alive right now.
func assertGone(t *testing.T, marker string) {
	t.Helper()
	if ps := testutil.Processes(marker); len(ps) > 0 {
		for _, p := range ps {
			t.Errorf("survivor pid %d: %s", p.Pid, testutil.Cmdline(p.Pid))
		}
	}
}

func TestStreamCapExactAndOneOver(t *testing.T) {
	spill := t.TempDir()
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 100, SpillParent: spill})
	r := run(t, ex, shell.Request{Command: "head -c 100 /dev/zero | tr '\\0' a"})
	if r.Stdout.Truncated || len(r.Stdout.Text) != 100 || r.Stdout.SpillPath != "" {
		t.Errorf("exact cap: truncated=%v len=%d spill=%q", r.Stdout.Truncated, len(r.Stdout.Text), r.Stdout.SpillPath)
	}
	if files, _ := filepath.Glob(filepath.Join(spill, "*", "*")); len(files) != 0 {
		t.Errorf("exact cap created spill files %v", files)
	}
	r = run(t, ex, shell.Request{Command: "printf b; head -c 100 /dev/zero | tr '\\0' a"})
	if !r.Stdout.Truncated || r.Stdout.Text != strings.Repeat("a", 100) || r.Stdout.SpillPath == "" {
		t.Fatalf("one over: %+v", r.Stdout)
	}
	whole, err := os.ReadFile(r.Stdout.SpillPath)
	if err != nil || string(whole) != "b"+strings.Repeat("a", 100) {
		t.Errorf("spill holds %q (%v)", whole, err)
	}
	fi, _ := os.Stat(r.Stdout.SpillPath)
	di, _ := os.Stat(filepath.Dir(r.Stdout.SpillPath))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("modes: file %v dir %v", fi.Mode(), di.Mode())
	}
	if !strings.HasSuffix(r.Stdout.SpillPath, "stdout") {
		t.Errorf("spill name %q does not end in the stream name", r.Stdout.SpillPath)
	}
	r = run(t, ex, shell.Request{Command: "head -c 150 /dev/zero | tr '\\0' e >&2"})
	if !r.Stderr.Truncated || !strings.HasSuffix(r.Stderr.SpillPath, "stderr") {
		t.Errorf("stderr: %+v", r.Stderr)
	}
}

func TestSpillDeletedPastCap(t *testing.T) {
	spill := t.TempDir()
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 1000, MaxSpillBytes: 10000, SpillParent: spill})
	r := run(t, ex, shell.Request{Command: "head -c 20000 /dev/zero | tr '\\0' z"})
	if !r.Stdout.Truncated || r.Stdout.SpillPath != "" || len(r.Stdout.Text) != 1000 {
		t.Errorf("past spill cap: truncated=%v spill=%q len=%d", r.Stdout.Truncated, r.Stdout.SpillPath, len(r.Stdout.Text))
	}
	if files, _ := filepath.Glob(filepath.Join(spill, "*", "*")); len(files) != 0 {
		t.Errorf("spill files left: %v", files)
	}
}

func TestSpillDirRemovedAtClose(t *testing.T) {
	spill := t.TempDir()
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 10, SpillParent: spill})
	r := run(t, ex, shell.Request{Command: "seq 1 100"})
	if r.Stdout.SpillPath == "" {
		t.Fatal("no spill")
	}
	ex.Close()
	if entries, _ := os.ReadDir(spill); len(entries) != 0 {
		t.Errorf("left after Close: %v", entries)
	}
}

func TestGarbageNeverBreaksCapture(t *testing.T) {
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 64000})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, cmd := range []string{
		"head -c 3000000 /dev/urandom",
		"head -c 100000000 /dev/zero | tr '\\0' x",                     // a 100 MB single line
		"for i in $(seq 1 20000); do printf 'progress %d\\r' $i; done", // \r flood
		"printf '\\xe2\\x82\\xac%.0s' $(seq 1 30000)",                  // € cut at any boundary
	} {
		r := run(t, ex, shell.Request{Command: cmd, Timeout: 60 * time.Second})
		if !utf8.ValidString(r.Stdout.Text) {
			t.Errorf("%q: invalid UTF-8", cmd)
		}
		if len(r.Stdout.Text) > 64000*3 { // U+FFFD is 3 bytes
			t.Errorf("%q: text of %d bytes", cmd, len(r.Stdout.Text))
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 32<<20 {
		t.Errorf("heap grew by %d bytes", grow)
	}
}

func TestBackgroundReads(t *testing.T) {
	ex, _ := newExec(t, nil)
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	cmd := fmt.Sprintf(`printf one; echo e1 >&2; while [ ! -e %[1]s ]; do sleep 0.01; done; echo two; rm %[1]s
while [ ! -e %[1]s ]; do sleep 0.01; done; echo three >&2`, gate)
	p := start(t, ex, shell.Request{Command: cmd})
	if p.Status() != shell.StatusRunning {
		t.Fatalf("status %v", p.Status())
	}
	r := readUntil(t, p, func(r shell.ReadResult) bool { return strings.Contains(r.Stderr, "e1") })
	if r.Text() != "one\n[stderr]\ne1\n" {
		t.Errorf("first read %q", r.Text())
	}
	if again := p.Read(); !again.Empty() {
		t.Errorf("re-delivered %+v", again)
	}
	os.WriteFile(gate, nil, 0o644)
	r = readUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout != "" })
	if r.Text() != "two\n" {
		t.Errorf("second read %q", r.Text())
	}
	for {
		if _, err := os.Stat(gate); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	os.WriteFile(gate, nil, 0o644)
	waitDone(t, p, 5*time.Second)
	if r := p.Read(); r.Text() != "[stderr]\nthree\n" {
		t.Errorf("read after exit %q", r.Text())
	}
	if r := p.Read(); !r.Empty() {
		t.Errorf("read with nothing new: %+v", r)
	}
	if p.Status() != shell.StatusCompleted || *p.ExitCode() != 0 {
		t.Errorf("status %v", p.Status())
	}
}

func readUntil(t *testing.T, p shell.Process, ok func(shell.ReadResult) bool) shell.ReadResult {
	t.Helper()
	var acc shell.ReadResult
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		r := p.Read()
		acc.Stdout += r.Stdout
		acc.Stderr += r.Stderr
		acc.Lossy = acc.Lossy || r.Lossy
		if ok(acc) {
			return acc
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("condition not met; read so far %+v", acc)
	return acc
}

func TestBackgroundLossyRead(t *testing.T) {
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 1000})
	p := start(t, ex, shell.Request{Command: "seq 1 5000; seq 1 3000 >&2"})
	waitDone(t, p, 5*time.Second)
	r := p.Read()
	if !r.Lossy || r.StdoutSpill == "" || r.StderrSpill == "" {
		t.Fatalf("lossy read %+v", r)
	}
	if !strings.HasSuffix(r.Stdout, "4999\n5000\n") || len(r.Stdout) > 1000 {
		t.Errorf("retained tail %q", r.Stdout[max(0, len(r.Stdout)-20):])
	}
	whole, _ := os.ReadFile(r.StdoutSpill)
	if !bytes.HasPrefix(whole, []byte("1\n2\n3\n")) || !bytes.HasSuffix(whole, []byte("5000\n")) {
		t.Errorf("spill is not the whole stream")
	}
	if again := p.Read(); !again.Empty() {
		t.Errorf("second read %+v", again)
	}
}

func TestSpawnFailureIsAnError(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Shell: "/nonexistent/bash"})
	spec, _ := ex.Resolve(shell.Request{Command: "true"})
	var se *shell.SpawnError
	if _, err := ex.Start(spec); !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "spawn failed: ") {
		t.Errorf("Start: %v", err)
	}
	if _, err := ex.Run(t.Context(), spec); !errors.As(err, &se) {
		t.Errorf("Run: %v", err)
	}
	if _, err := ex.Launch(spec); !errors.As(err, &se) {
		t.Errorf("Launch: %v", err)
	}
}

func TestKillTrueThenFalse(t *testing.T) {
	ex, _ := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "sleep 30"})
	t0 := time.Now()
	if !p.Kill() {
		t.Fatal("first Kill returned false")
	}
	if p.Kill() {
		t.Error("second Kill returned true")
	}
	waitDone(t, p, 5*time.Second)
	t.Logf("cooperative kill settled in %v", time.Since(t0))
	if p.Status() != shell.StatusKilled || p.Signal() != "SIGTERM" {
		t.Errorf("status %v signal %q", p.Status(), p.Signal())
	}
	if p.Kill() {
		t.Error("Kill after settling returned true")
	}
	done := start(t, ex, shell.Request{Command: "true"})
	waitDone(t, done, 5*time.Second)
	if done.Kill() || done.Status() != shell.StatusCompleted {
		t.Errorf("finished process: Kill true or status %v", done.Status())
	}
}

func TestKilledStaysKilledAfterTrappedExitZero(t *testing.T) {
	ex, _ := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "trap 'exit 0' TERM; echo ready; sleep 30 & wait"})
	readUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "ready\n" })
	p.Kill()
	waitDone(t, p, 5*time.Second)
	if p.Status() != shell.StatusKilled || code(shell.Result{ExitCode: p.ExitCode()}) != 0 {
		t.Errorf("status %v exit %v", p.Status(), p.ExitCode())
	}
}

func TestSelfSignalInBackgroundIsKilled(t *testing.T) {
	ex, _ := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "kill -TERM $$"})
	waitDone(t, p, 5*time.Second)
	if p.Status() != shell.StatusKilled || p.Signal() != "SIGTERM" {
		t.Errorf("status %v signal %q", p.Status(), p.Signal())
	}
}

func TestManyShortCommandsLeaveNothing(t *testing.T) {
	n := 5000
	if testing.Short() {
		n = 500
	}
	ex, _ := newExec(t, nil)
	// Warm up so that lazily created runtime resources are not counted.
	run(t, ex, shell.Request{Command: "true"})
	fds := testutil.CountFDs(t)
	goroutines := runtime.NumGoroutine()
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			run(t, ex, shell.Request{Command: "true"})
		} else {
			p := start(t, ex, shell.Request{Command: "echo $$"})
			<-p.Done()
			p.Read()
		}
	}
	time.Sleep(200 * time.Millisecond) // the reaper's debounce
	if z := testutil.ZombieChildren(); len(z) > 0 {
		t.Errorf("zombies: %v", z)
	}
	if got := testutil.CountFDs(t); got > fds {
		t.Errorf("fds: %d before, %d after", fds, got)
	}
	if got := runtime.NumGoroutine(); got > goroutines+2 {
		t.Errorf("goroutines: %d before, %d after", goroutines, got)
	}
}

// The facts a reader needs to cut a long stream into head and tail.
func TestOutputFacts(t *testing.T) {
	ex, _ := newExec(t, &local.Options{MaxOutputBytes: 1000, MaxSpillBytes: 200_000})
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	r := run(t, ex, shell.Request{Command: "seq 1 20000"})
	out := r.Stdout
	if out.Size != int64(want.Len()) || out.Lines != 20000 || !out.Truncated {
		t.Errorf("Size %d, Lines %d, Truncated %v; want %d, 20000, true", out.Size, out.Lines, out.Truncated, want.Len())
	}
	if out.Head != want.String()[:shell.HeadBytes] || !strings.HasSuffix(want.String(), out.Text) || len(out.Text) != 1000 {
		t.Errorf("Head %d bytes, Text %d bytes: not the stream's start and end", len(out.Head), len(out.Text))
	}
	if out.SpillPath == "" || out.SpillErr != nil {
		t.Errorf("SpillPath %q, SpillErr %v; want a spill file", out.SpillPath, out.SpillErr)
	}
	if r.Stderr.Size != 0 || r.Stderr.Head != "" || r.Stderr.SpillErr != nil {
		t.Errorf("empty stderr: %+v", r.Stderr)
	}

	r = run(t, ex, shell.Request{Command: "seq 1 40000"}) // 228,894 bytes: past the spill cap
	var ce *shell.SpillCapError
	if !errors.As(r.Stdout.SpillErr, &ce) || ce.Cap != 200_000 || r.Stdout.SpillPath != "" {
		t.Errorf("past the spill cap: SpillErr %v, SpillPath %q", r.Stdout.SpillErr, r.Stdout.SpillPath)
	}

	p := start(t, ex, shell.Request{Command: "seq 1 20000; echo err >&2"})
	waitDone(t, p, 5*time.Second)
	rr := p.Read()
	if !rr.Lossy || rr.StdoutSkipped.Bytes+int64(len(rr.Stdout)) != int64(want.Len()) ||
		rr.StdoutSkipped.Lines+int64(strings.Count(rr.Stdout, "\n")) != 20000 || rr.StderrSkipped != (shell.Omission{}) {
		t.Errorf("lossy read: %d bytes, skipped %+v (stderr %+v); want the rest of %d bytes and 20000 lines",
			len(rr.Stdout), rr.StdoutSkipped, rr.StderrSkipped, want.Len())
	}
	if rr.StdoutSpill == "" || rr.StdoutSpillErr != nil || rr.StderrSpillErr != nil {
		t.Errorf("lossy read: spill %q, errors %v, %v", rr.StdoutSpill, rr.StdoutSpillErr, rr.StderrSpillErr)
	}
}
