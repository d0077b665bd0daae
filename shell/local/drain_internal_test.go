//go:build linux

package local

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadableUnderSignals: signals to every thread of the process do
// not cut readable's wait short, as they did the drain's wait for a
// pipe's end (poll(2) returns EINTR, never restarted), which then
// called the pipe held by a process left running.
func TestReadableUnderSignals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		pid := os.Getpid()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tasks, _ := os.ReadDir("/proc/self/task")
			for _, task := range tasks {
				if tid, err := strconv.Atoi(task.Name()); err == nil {
					unix.Tgkill(pid, tid, unix.SIGURG) // the runtime's own: ignored
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	closer := time.AfterFunc(100*time.Millisecond, func() { w.Close() })
	defer closer.Stop()
	start := time.Now()
	ok := readable(int(r.Fd()), 10*time.Second)
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if !ok || took < 90*time.Millisecond {
		t.Errorf("readable = %v after %v; want true once the writer closes at 100ms", ok, took)
	}
}
