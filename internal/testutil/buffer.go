//go:build linux

package testutil

import (
	"bytes"
	"sync"
)

// Buffer collects what a process or server under test writes (its stderr,
// its logs) from several goroutines at once, for the test to read.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
