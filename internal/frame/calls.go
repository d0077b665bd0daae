package frame

import "sync"

// Calls matches answers to the requests awaiting them. The zero value is
// ready to use; its methods are safe for concurrent use.
type Calls[T any] struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan T
	err     error // set by Fail: no call may begin after it
}

// Begin registers a call and returns its ID (never 0: protocols keep 0
// for notifications) and the channel its answer comes on. The channel is
// closed without an answer if the calls fail first (Err says why).
// After Fail, Begin returns Fail's error.
func (c *Calls[T]) Begin() (id uint64, answer <-chan T, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, nil, c.err
	}
	if c.pending == nil {
		c.pending = make(map[uint64]chan T)
	}
	c.next++
	ch := make(chan T, 1)
	c.pending[c.next] = ch
	return c.next, ch, nil
}

// Forget drops a call that will not be answered (its request was never
// sent).
func (c *Calls[T]) Forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Answer delivers v to the call id and reports whether one awaited it.
func (c *Calls[T]) Answer(id uint64, v T) bool {
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- v // buffered, and answered once
	return true
}

// Fail ends every call awaiting an answer, and every later one, with err;
// the first Fail's error stays. It returns that error.
func (c *Calls[T]) Fail(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err, pending := c.err, c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	return err
}

// Err is Fail's error, or nil.
func (c *Calls[T]) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
