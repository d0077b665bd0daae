// Package syncio has the one writer the JSON-RPC transports share.
package syncio

import (
	"io"
	"sync"
)

// Writer makes each Write to W whole: writes from several goroutines (an
// SDK's messages and a filter's error replies) never interleave. The
// zero value is not usable; set W.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.W.Write(p)
}
