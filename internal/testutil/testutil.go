//go:build linux

// Package testutil checks that tests leave no process, zombie, file descriptor or goroutine behind.
//
// Every test that starts processes takes a Marker, puts it in the
// environment of what it starts (MarkerEnv), and ends with
// AssertNoProcesses(t, marker) and VerifyNoLeaks(t). The marker is
// inherited by everything the command starts, including processes that
// left its group and session (setsid, double fork, nohup), so the check
// finds exactly what this test started.
package testutil

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
)

// MarkerEnv is the environment variable that carries a test's marker into
// the processes it starts. It deliberately does not begin with "CONCH_":
// the local executor scrubs inherited CONCH_* names, and a name that
// survives the scrub also works for commands that inherit the test's own
// environment. Through an executor, pass it in Request.Env all the same
// (explicit entries survive any scrub), e.g.
//
//	Env: map[string]string{testutil.MarkerEnv: marker}
const MarkerEnv = "CONCHTEST_MARKER"

// Marker returns a marker unique to this test run: "conchtest_", the
// test's name reduced to [A-Za-z0-9_] (at most 40 bytes), "_" and 16
// random hex digits. It needs no quoting, in an environment value or in a
// shell command.
func Marker(t testing.TB) string {
	t.Helper()
	m, err := MarkerFor(t.Name())
	if err != nil {
		t.Fatalf("testutil: marker: %v", err)
	}
	return m
}

// MarkerFor is Marker for a test by its name, for work started before the
// test runs (from TestMain).
func MarkerFor(test string) (string, error) {
	var name strings.Builder
	for _, r := range test {
		if name.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			name.WriteRune(r)
		default:
			name.WriteByte('_')
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "conchtest_" + name.String() + "_" + hex.EncodeToString(b[:]), nil
}

// Env returns os.Environ() with MarkerEnv=marker appended, for an
// exec.Cmd.Env.
func Env(marker string) []string {
	return append(os.Environ(), MarkerEnv+"="+marker)
}

// Processes returns the live (non-zombie) processes, other than this one,
// whose environment or command line contains marker.
func Processes(marker string) []proc.Info {
	infos, err := proc.Scan()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	m := []byte(marker)
	var out []proc.Info
	for _, p := range infos {
		if p.Pid == self || !p.Alive() {
			continue
		}
		if carries(p, m) {
			out = append(out, p)
		}
	}
	return out
}

// carries reports whether p's environment or command line holds m. A
// process in the middle of an exec shows neither for a moment (its new
// memory has no arguments yet): read as empty, it would pass for a
// process without the marker, and a test waiting for the marker's
// processes to be gone would see one gone that is not. Such a process
// is read again until it shows them; kernel threads never do.
func carries(p proc.Info, m []byte) bool {
	kernel := p.Pid == 2 || p.PPid == 2
	for try := 0; ; try++ {
		env, errEnv := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/environ")
		cmd, errCmd := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if errEnv != nil && errCmd != nil {
			return false // gone, or not ours to read
		}
		if len(env) > 0 || len(cmd) > 0 || kernel || try == 200 {
			return bytes.Contains(env, m) || bytes.Contains(cmd, m)
		}
		time.Sleep(time.Millisecond)
	}
}

// Cmdline returns the command line of pid, its arguments joined by spaces,
// or "?" if it cannot be read.
func Cmdline(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return "?"
	}
	return string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
}

// AssertNoProcesses waits up to 3 s for every process carrying marker to
// be gone. If some survive it fails the test, listing them, and SIGKILLs
// them so that one failing test does not poison the next.
func AssertNoProcesses(t testing.TB, marker string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	var left []proc.Info
	for {
		left = Processes(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var b strings.Builder
	for _, p := range left {
		fmt.Fprintf(&b, "\n\tpid %d ppid %d pgid %d sid %d state %c: %s",
			p.Pid, p.PPid, p.Pgid, p.Sid, p.State, Cmdline(p.Pid))
	}
	for _, p := range left {
		proc.Signal(p, unix.SIGKILL)
	}
	t.Errorf("testutil: %d process(es) with marker %s survived:%s", len(left), marker, b.String())
}

// CountFDs returns the number of open file descriptors of this process
// (entries of /proc/self/fd, the one used to list them included; compare
// two counts, not a count with a constant).
func CountFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("testutil: count fds: %v", err)
	}
	return len(entries)
}

// ZombieChildren returns the pids of the direct children of this process
// that are zombies (exited, not reaped).
func ZombieChildren() []int {
	infos, err := proc.Scan()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, p := range infos {
		if p.PPid == self && p.State == 'Z' {
			out = append(out, p.Pid)
		}
	}
	return out
}

// LeakOptions are the goleak options conch's tests use: they ignore the
// orphan reaper that proc.BecomeSubreaper starts for the life of the
// process.
func LeakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction(proc.ReaperFunc)}
}

// VerifyNoLeaks fails t if goroutines other than the test's own and those
// LeakOptions ignores are still running (after goleak's retries). Tests
// that call it must not run in parallel with tests that start goroutines.
func VerifyNoLeaks(t testing.TB) {
	t.Helper()
	goleak.VerifyNone(t, LeakOptions()...)
}

// VerifyTestMain runs the tests of m, then each of cleanups, removes the
// binary ConchBinary built, and fails the binary if goroutines leaked;
// call it from TestMain.
func VerifyTestMain(m *testing.M, cleanups ...func()) {
	goleak.VerifyTestMain(m, append(LeakOptions(), goleak.Cleanup(func(code int) {
		for _, c := range cleanups {
			c()
		}
		removeConchBinary()
		os.Exit(code)
	}))...)
}
