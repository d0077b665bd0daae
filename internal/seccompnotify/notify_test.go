//go:build linux && (amd64 || arm64)

package seccompnotify

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestReceiverWakesOne: a notification wakes one of the receivers waiting
// for it, not all of them. Eight receivers, each on a thread of its own,
// answer 200 getppid calls of a filtered thread; their threads sleep
// about once per call in all (200–360 times here, beside two CPU burners
// under -race). Threads waiting in SECCOMP_IOCTL_NOTIF_RECV itself, or
// in epoll without EPOLLEXCLUSIVE, wake several at each call: 1,080–1,610
// times. The listener's Close makes every receiver return.
func TestReceiverWakesOne(t *testing.T) {
	prog := getppidFilter(t)
	const calls, receivers, answer = 200, 8, 4242

	// The filtered thread: its goroutine never unlocks it, so that the
	// thread ends with the goroutine (or is left unused, on the main
	// thread), the filter with it.
	loaded := make(chan error, 1)
	l := make(chan *Listener, 1)
	call := make(chan struct{})
	got := make(chan int64)
	go func() {
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			loaded <- err
			return
		}
		lis, err := Load(prog, true)
		loaded <- err
		if err != nil {
			return
		}
		l <- lis
		for range call {
			r, _, _ := unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
			got <- int64(r)
		}
	}()
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	lis := <-l
	defer lis.Close() // at a failure; Close again is harmless

	var wg sync.WaitGroup
	tids := make(chan int, receivers)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := lis.NewReceiver()
			if err != nil {
				t.Error(err)
				tids <- 0
				return
			}
			tids <- unix.Gettid()
			var n Notif
			for r.Receive(&n) == nil {
				lis.Return(n.ID, answer)
			}
		}()
	}
	var threads []int
	for range receivers {
		threads = append(threads, <-tids)
	}
	// A receiver not yet waiting counts one sleep more when it first
	// waits: eight at most, well inside the bound.
	before := sleeps(t, threads)
	for range calls {
		call <- struct{}{}
		if r := <-got; r != answer {
			t.Fatalf("getppid returned %d, want the receiver's %d", r, answer)
		}
	}
	woke := sleeps(t, threads) - before
	close(call)
	lis.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the receivers did not return once the listener was closed")
	}
	t.Logf("%d receivers slept %d times for %d calls", receivers, woke, calls)
	if woke > 3*calls {
		t.Errorf("%d receivers slept %d times for %d calls: each call woke more than one", receivers, woke, calls)
	}
}

// sleeps is the sum of the voluntary context switches of threads of this
// process: a thread woken from a wait counts one when it waits again.
func sleeps(t *testing.T, threads []int) int {
	t.Helper()
	sum := 0
	for _, tid := range threads {
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatal(err)
				}
				sum += n
			}
		}
	}
	return sum
}

// TestReceiverHangUp: when the last thread the filter binds exits, the
// listener hangs up, and every receiver returns (the one the hang-up
// woke wakes the others), without the listener being closed.
func TestReceiverHangUp(t *testing.T) {
	prog := getppidFilter(t)
	type loaded struct {
		l   *Listener
		err error
	}
	ready := make(chan loaded, 1)
	exit := make(chan struct{})
	var load func()
	load = func() {
		// Never unlocked: the thread ends with the goroutine. The main
		// thread would not end: it stays locked to this goroutine, so
		// that another goroutine loads the filter elsewhere, and is
		// unlocked, unchanged, when the test is over.
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			defer runtime.UnlockOSThread()
			go load()
			<-exit
			return
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			ready <- loaded{err: err}
			return
		}
		l, err := Load(prog, true)
		ready <- loaded{l, err}
		<-exit
	}
	go load()
	r := <-ready
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Close()
	const receivers = 4
	var wg sync.WaitGroup
	started := make(chan error, receivers)
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rcv, err := r.l.NewReceiver()
			started <- err
			if err != nil {
				return
			}
			var n Notif
			for rcv.Receive(&n) == nil {
				r.l.Return(n.ID, 0)
			}
		}()
	}
	for range receivers {
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	}
	close(exit) // the filter's only thread exits
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the receivers did not return once the filter's last thread exited")
	}
}

// getppidFilter is a filter that notifies getppid, which the Go runtime
// never calls.
func getppidFilter(t *testing.T) []unix.SockFilter {
	t.Helper()
	arch := uint32(unix.AUDIT_ARCH_X86_64)
	if runtime.GOARCH == "arm64" {
		arch = unix.AUDIT_ARCH_AARCH64
	}
	prog, err := Program([]ABI{{Arch: arch, Rules: []Rule{{Nr: unix.SYS_GETPPID, Action: Notify}}}})
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// TestSyncWakeUp: on Linux 6.6 and later, Load's listener wakes a
// notified caller on its supervisor's CPU
// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP), and its calls are answered as
// before.
func TestSyncWakeUp(t *testing.T) {
	prog := getppidFilter(t)
	loaded := make(chan *Listener, 1)
	done := make(chan int64)
	go func() {
		runtime.LockOSThread() // never unlocked: the filtered thread ends with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			t.Error(err)
			close(loaded)
			return
		}
		l, err := Load(prog, true)
		if err != nil {
			t.Error(err)
			close(loaded)
			return
		}
		loaded <- l
		r, _, _ := unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
		done <- int64(r)
	}()
	l := <-loaded
	if l == nil {
		return
	}
	t.Cleanup(func() { l.Close() }) // on a failure before the Close below
	// Before 6.6 either way: a distribution's kernel may have the flag.
	if !l.syncWake && testutil.KernelAtLeast(t, 6, 6) {
		t.Error("no synchronous wake-ups on Linux 6.6 or later")
	}
	rcv, err := l.NewReceiver()
	if err != nil {
		t.Fatal(err)
	}
	var n Notif
	if err := rcv.Receive(&n); err != nil {
		t.Fatal(err)
	}
	if err := l.Return(n.ID, 4242); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != 4242 {
		t.Errorf("the notified getppid returned %d; want 4242", got)
	}
	// The receiver lets go of its descriptors once the listener is
	// closed and it has seen so.
	l.Close()
	if err := rcv.Receive(&n); err != errClosed {
		t.Errorf("Receive after Close: %v; want %v", err, errClosed)
	}
}
