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

// TestShortSlice: the thread that asks gets the shortest slice (Linux
// 6.12 and later) and keeps its nice value; a command it starts gets the
// default slice, and the same nice value.
func TestShortSlice(t *testing.T) {
	type result struct {
		err                       error
		before, slice, nice       string
		commandSlice, commandNice string
	}
	got := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		defer func() { got <- r }()
		read := func(path string) string {
			b, err := os.ReadFile(path)
			if err != nil && r.err == nil {
				r.err = err
			}
			return string(b)
		}
		r.before = testutil.SchedSlice(read("/proc/thread-self/sched"))
		if r.err = unix.Setpriority(unix.PRIO_PROCESS, 0, 5); r.err != nil { // this thread's
			return
		}
		if r.err = proc.ShortSlice(); r.err != nil {
			return
		}
		r.slice = testutil.SchedSlice(read("/proc/thread-self/sched"))
		r.nice = statNice(read("/proc/thread-self/stat"))
		out, err := exec.Command("sh", "-c", "cat /proc/self/sched; echo =stat=; cat /proc/self/stat").Output()
		if err != nil {
			r.err = err
			return
		}
		sched, stat, _ := strings.Cut(string(out), "=stat=\n")
		r.commandSlice, r.commandNice = testutil.SchedSlice(sched), statNice(stat)
	}()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
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
	type result struct {
		err                 error
		before, slice, nice string
	}
	got := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		defer func() { got <- r }()
		b, err := os.ReadFile("/proc/thread-self/sched")
		if err != nil {
			r.err = err
			return
		}
		r.before = testutil.SchedSlice(string(b))
		if r.err = unix.Setpriority(unix.PRIO_PROCESS, 0, -5); r.err != nil {
			return
		}
		if r.err = proc.ShortSlice(); r.err != nil {
			return
		}
		out, err := exec.Command("cat", "/proc/self/stat").Output()
		if err != nil {
			r.err = err
			return
		}
		b, err = os.ReadFile("/proc/thread-self/sched")
		if err != nil {
			r.err = err
			return
		}
		r.slice = testutil.SchedSlice(string(b))
		r.nice = statNice(string(out))
	}()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.slice != r.before || r.nice != "-5" {
		t.Errorf("at nice -5: the thread's slice %s ns (want %s, left as it was), a command's nice %s (want -5)", r.slice, r.before, r.nice)
	}
}
