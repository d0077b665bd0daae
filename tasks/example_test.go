package tasks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/conch-dev/conch/tasks"
)

// job is a producer's background work: it prints its lines and exits 0.
// A real producer (conch's bash tool) wraps a running command the same
// way.
type job struct {
	mu      sync.Mutex
	unread  strings.Builder
	written int64
	done    chan struct{}
}

func startJob(lines ...string) *job {
	j := &job{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		for _, l := range lines {
			j.mu.Lock()
			j.unread.WriteString(l + "\n")
			j.written += int64(len(l) + 1)
			j.mu.Unlock()
		}
	}()
	return j
}

func (j *job) Read() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.unread.String()
	j.unread.Reset()
	return s
}

func (j *job) Peek(maxBytes int) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.unread.String()
	return s[len(s)-min(len(s), maxBytes):]
}

func (j *job) Written() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.written
}

func (j *job) Cancel(string) {} // it ends on its own, at once

func (j *job) Done() <-chan struct{} { return j.done }

func (j *job) Outcome() tasks.Outcome {
	code := 0
	return tasks.Outcome{Status: tasks.StatusCompleted, ExitCode: &code}
}

// A runtime owns the background work that producers hand it, per owner
// (a session): start it, wait for it, collect the completion notice, read
// its output.
func Example() {
	rt := tasks.New(nil)
	defer rt.Close() // stops whatever still runs
	const owner = "session-1"

	info, err := rt.Start(owner, "job", "count to three", func() (tasks.Handle, error) {
		return startJob("one", "two", "three"), nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("started", info.ID)

	info, err = rt.Wait(context.Background(), owner, info.ID, time.Minute)
	fmt.Println(info.ID, info.Outcome.StatusLine(), err)
	for _, n := range rt.Notices(owner) {
		fmt.Printf("notice: %s ended; last output %q\n", n.ID, n.LastOutput)
	}
	out, _, _ := rt.Read(owner, info.ID)
	fmt.Printf("read: %q\n", out)
	_, _, err = rt.Read("session-2", info.ID)
	fmt.Println("another owner:", err)

	// Output:
	// started job-1
	// job-1 [status: completed, exit code: 0] <nil>
	// notice: job-1 ended; last output "one\ntwo\nthree"
	// read: "one\ntwo\nthree\n"
	// another owner: task job-1 belongs to another session
}
