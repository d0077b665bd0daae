//go:build linux

package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// ForkLoop returns a bash command that ignores SIGTERM and forks and exits
// in a loop (perl), so that at any moment one short-lived process is
// alive and a /proc scan (a directory listing, then one read per entry)
// sees none; and the file it touches every 8 generations, which is how a
// test sees it run (Beating). It ends on its own after 15 s: a test that
// fails must not leave a fork loop eating the machine's pids.
func ForkLoop(t testing.TB) (cmd, beat string) {
	t.Helper()
	beat = filepath.Join(t.TempDir(), "beat")
	if err := os.WriteFile(beat, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = `perl -e 'use Time::HiRes qw(time); $SIG{TERM}="IGNORE"; my $end = time + 15; my $i = 0;
while (time < $end) { exit 0 if fork; utime(undef, undef, "` + beat + `") if ++$i % 8 == 0 }'`
	return cmd, beat
}

// Beating reports whether the loop of ForkLoop touches beat within a
// second. It returns as soon as it sees a touch; a loop starved of CPU on
// a loaded machine still beats within that second (8 generations took up
// to 60 ms at a load of 10 on 2 cores, where 64 took up to 410 ms), so a
// false answer means the loop is gone.
func Beating(t testing.TB, beat string) bool {
	t.Helper()
	before, err := os.Stat(beat)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		after, err := os.Stat(beat)
		if err != nil {
			t.Fatal(err)
		}
		if !after.ModTime().Equal(before.ModTime()) {
			return true
		}
	}
	return false
}

// StillBeating reports whether the loop of ForkLoop touches beat within
// 5 s, for a test that expects the loop to be alive: it returns at the
// first touch. A loop that is gone never touches the file again, however
// long the wait, so the longer window hides no kill; it spares the test
// a loop that went a second without a touch on a loaded machine (once in
// CI, cause not found: a utime on this disk under two writers' fsyncs
// took at most 4 ms).
func StillBeating(t testing.TB, beat string) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if Beating(t, beat) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// WaitBeating waits up to 5 s for the loop of ForkLoop to run.
func WaitBeating(t testing.TB, beat string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !Beating(t, beat) {
		if time.Now().After(deadline) {
			t.Fatal("testutil: the fork loop did not start")
		}
	}
}

// BoundedForks is a python3 command line that forks at most 200 children,
// each closing its standard files and sleeping at most 30 s, stops at the
// first fork that fails, and prints how many children it made: a fork
// bomb bounded by count and by time, for tests of a pids limit. Run it
// where what it leaves is ended with the command (a contained executor's
// init).
const BoundedForks = `python3 -c '
import os, time
n = 0
for i in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.closerange(0, 3)
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)
'`

// MemoryHog is a python3 command line that writes mib MiB into its memory
// (every page touched) and then prints "survived", for tests of a memory
// limit.
func MemoryHog(mib int) string {
	return `python3 -c 'b = b"x" * (` + strconv.Itoa(mib) + ` << 20); print("survived")'`
}
