package term

import (
	"os"
	"sync"
)

// inputQueue holds the bytes bound for the program (typed input, the
// emulator's answers) and writes them to the terminal from its own
// goroutine: a program that does not read its input blocks this writer,
// never the emulator, so its output keeps flowing.
type inputQueue struct {
	w *os.File

	mu     sync.Mutex
	buf    []byte
	closed bool
	wake   chan struct{} // one pending wake-up
}

func newInputQueue(w *os.File) *inputQueue {
	return &inputQueue{w: w, wake: make(chan struct{}, 1)}
}

func (q *inputQueue) push(b []byte) {
	q.mu.Lock()
	q.buf = append(q.buf, b...)
	q.mu.Unlock()
	q.signal()
}

// close lets the writer end once the queue is empty.
func (q *inputQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *inputQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run writes queued bytes until the queue is closed and empty, or the
// terminal is gone.
func (q *inputQueue) run(wg *sync.WaitGroup) {
	defer wg.Done()
	for range q.wake {
		for {
			q.mu.Lock()
			b, closed := q.buf, q.closed
			q.buf = nil
			q.mu.Unlock()
			if len(b) == 0 {
				if closed {
					return
				}
				break
			}
			if _, err := q.w.Write(b); err != nil {
				q.mu.Lock()
				q.closed, q.buf = true, nil
				q.mu.Unlock()
				return
			}
		}
	}
}
