//go:build linux

package proc_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// statNice is the nice value (the 19th field) of a stat file of /proc.
func statNice(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if f := strings.Fields(stat[i+1:]); i >= 0 && len(f) > 16 {
		return f[16]
	}
	return ""
}

// sliceResult is what shortSliceAt saw: the thread's slice before and
// after ShortSlice and its nice value after, and the slice and nice
// value of a command it then started.
type sliceResult struct {
	before, slice, nice       string
	commandSlice, commandNice string
}

// shortSliceAt calls ShortSlice on a thread of its own at nice value
// nice (this thread's, PRIO_PROCESS of 0), and starts a command from it.
func shortSliceAt(t *testing.T, nice int) sliceResult {
	t.Helper()
	var r sliceResult
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var err error
		defer func() { errc <- err }()
		read := func(path string) string {
			b, e := os.ReadFile(path)
			if e != nil && err == nil {
				err = e
			}
			return string(b)
		}
		r.before = testutil.SchedSlice(read("/proc/thread-self/sched"))
		if err = unix.Setpriority(unix.PRIO_PROCESS, 0, nice); err != nil {
			return
		}
		if err = proc.ShortSlice(); err != nil {
			return
		}
		r.slice = testutil.SchedSlice(read("/proc/thread-self/sched"))
		r.nice = statNice(read("/proc/thread-self/stat"))
		out, e := exec.Command("sh", "-c", "cat /proc/self/sched; echo =stat=; cat /proc/self/stat").Output()
		if e != nil {
			err = e
			return
		}
		sched, stat, _ := strings.Cut(string(out), "=stat=\n")
		r.commandSlice, r.commandNice = testutil.SchedSlice(sched), statNice(stat)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return r
}

// TestShortSlice: the thread that asks gets the shortest slice (Linux
// 6.12 and later) and keeps its nice value; a command it starts gets the
// default slice, and the same nice value.
func TestShortSlice(t *testing.T) {
	r := shortSliceAt(t, 5)
	t.Logf("slice %s ns by default, %s after; a command's %s", r.before, r.slice, r.commandSlice)
	if r.nice != "5" || r.commandNice != "5" {
		t.Errorf("nice %q, a command's %q; want 5 for both", r.nice, r.commandNice)
	}
	if r.commandSlice != r.before {
		t.Errorf("a command's slice %s ns; want the default, %s", r.commandSlice, r.before)
	}
	want := r.before // older kernels ignore it
	if testutil.KernelAtLeast(t, 6, 12) {
		want = "100000"
	}
	if r.slice != want {
		t.Errorf("the thread's slice %s ns after ShortSlice; want %s", r.slice, want)
	}
}

// TestShortSliceNegativeNice: a thread at a negative nice value is left
// as it is, so that the commands it starts keep that value
// (SCHED_FLAG_RESET_ON_FORK would start them at nice 0). Only root may
// lower a nice value.
func TestShortSliceNegativeNice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a negative nice value needs root (CAP_SYS_NICE)")
	}
	r := shortSliceAt(t, -5)
	if r.slice != r.before || r.commandNice != "-5" {
		t.Errorf("at nice -5: the thread's slice %s ns (want %s, left as it was), a command's nice %s (want -5)", r.slice, r.before, r.commandNice)
	}
}
