//go:build linux

package local_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
)

// TestPeekDoesNotConsume: Peek shows the end of each stream's unread
// output, cut at a line, and the next Read still returns all of it.
func TestPeekDoesNotConsume(t *testing.T) {
	ex, _ := newExec(t, nil)
	p := start(t, ex, shell.Request{Command: "seq 1 100; echo oops >&2"})
	waitDone(t, p, 20*time.Second)
	peek := p.Peek(10)
	if peek.Stdout != "99\n100\n" || peek.Stderr != "oops\n" || peek.Lossy {
		t.Fatalf("Peek(10) = %+v", peek)
	}
	r := p.Read()
	var want strings.Builder
	for i := 1; i <= 100; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if r.Stdout != want.String() || r.Stderr != "oops\n" {
		t.Fatalf("Read after Peek = %q / %q", r.Stdout, r.Stderr)
	}
	if after := p.Peek(10); after.Stdout != "" || after.Stderr != "" {
		t.Fatalf("Peek after the last Read = %+v", after)
	}
}
