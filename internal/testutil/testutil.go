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
	"sync"
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
// whose environment or command line contains marker. A scan of /proc
// that fails (no descriptor left for a moment) is made again: an empty
// answer would say that every process is gone. It panics when /proc
// stays unreadable for 5 s, since no check of processes can hold then.
func Processes(marker string) []proc.Info {
	infos, err := proc.Scan()
	for try := 0; err != nil; try++ {
		if try == 500 {
			panic(fmt.Sprintf("testutil: /proc unreadable for 5 s: %v", err))
		}
		time.Sleep(10 * time.Millisecond)
		infos, err = proc.Scan()
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

// Commands is Processes without the warm shells (docs/executor.md#warm-shells):
// the bash that conch serve, acp or agent starts ahead for a session's
// next command carries the test's marker as commands do, and a test that
// counts what its commands run does not count it. Only for counts while
// a test runs: at its end, AssertNoProcesses counts every process.
func Commands(marker string) []proc.Info {
	var out []proc.Info
	for _, p := range Processes(marker) {
		cmd, err := readWhole("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if err == nil && bytes.Contains(cmd, []byte("__conch_command")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// carries reports whether p's environment or command line holds m. A
// process in the middle of an exec shows neither for a moment (its new
// memory has no arguments yet), then its new arguments a moment before
// its new environment (the kernel's create_elf_tables sets them in that
// order): read then, it would pass for a process without the marker,
// and a test waiting for the marker's processes to be gone would see
// one gone that is not (bash -c 'sleep 1011' exec'ing sleep did). Such a
// process is read again until it shows both; kernel threads never do.
// A process whose environment is empty for good (an init started with
// none) is known as such after one wait (emptyEnv), not at every look.
func carries(p proc.Info, m []byte) bool {
	kernel := p.Pid == 2 || p.PPid == 2
	for try := 0; ; try++ {
		env, errEnv := readWhole("/proc/" + strconv.Itoa(p.Pid) + "/environ")
		cmd, errCmd := readWhole("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		if errEnv != nil && errCmd != nil {
			return false // gone
		}
		settled := kernel || len(env) > 0 || errEnv != nil && len(cmd) > 0 // an environment not ours to read: the command line says
		if !settled && len(cmd) > 0 {
			if _, known := emptyEnv.Load(emptyEnvKey(p)); known || try >= emptyEnvTries {
				emptyEnv.Store(emptyEnvKey(p), struct{}{})
				settled = true
			}
		}
		if settled || try == execTries {
			return bytes.Contains(env, m) || bytes.Contains(cmd, m)
		}
		time.Sleep(time.Millisecond)
	}
}

// readWhole reads a process's environ or cmdline file in one read(2).
// Several reads (os.ReadFile's) can span an exec: the file reads the
// memory the process had when it was opened, which the exec drops, and
// a read after that drop finds the end, so the content came cut short
// (an environment without its last entries, the marker). One read holds
// that memory for its length.
func readWhole(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	for buf := *bp; ; buf = make([]byte, 4*len(buf)) {
		n, err := unix.Pread(int(f.Fd()), buf, 0)
		if err == unix.EINTR {
			continue
		}
		if n < len(buf) || err != nil {
			return bytes.Clone(buf[:max(n, 0)]), err
		}
	}
}

// readBufs holds readWhole's buffers: large enough for nearly every
// environment, and reused, since every look at the processes reads two
// files of each.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// execTries bounds the reads, a millisecond apart, that carries gives a
// process that shows neither arguments nor environment to show them.
const execTries = 200

// emptyEnvTries is how many reads, a millisecond apart, carries gives a
// process with arguments to show its environment before taking it for
// one whose environment is empty.
const emptyEnvTries = 50

// emptyEnv holds the processes seen with an empty environment for good,
// by pid and start time (a pid reused is another process).
var emptyEnv sync.Map // [2]uint64 → struct{}

func emptyEnvKey(p proc.Info) [2]uint64 { return [2]uint64{uint64(p.Pid), p.StartTime} }

// Cmdline returns the command line of pid, its arguments joined by spaces,
// or "?" if it cannot be read.
func Cmdline(pid int) string {
	b, err := readWhole("/proc/" + strconv.Itoa(pid) + "/cmdline")
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
