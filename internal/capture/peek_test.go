package capture

import "testing"

// TestPeek: Peek shows the end of what Next would return, cut at a line
// (or character) boundary, and never moves the cursor.
func TestPeek(t *testing.T) {
	for _, c := range []struct {
		name    string
		read    string // written and consumed with Next first
		unread  string // written after that
		closed  bool
		max     int
		want    string
		maxTail int
	}{
		{name: "all of it", unread: "a\nb\n", max: 100, want: "a\nb\n"},
		{name: "nothing unread", read: "a\n", max: 100, want: ""},
		{name: "after a read", read: "old\n", unread: "new\n", max: 100, want: "new\n"},
		{name: "cut at a line", unread: "first line\nsecond\nthird\n", max: 10, want: "third\n"},
		{name: "cut inside the last line", unread: "a\n0123456789", max: 6, want: "456789"},
		{name: "newline as the last byte only", unread: "0123456789\n", max: 4, want: "789\n"},
		{name: "cut inside a character", unread: "xx\u00e9\u00e9", max: 3, want: "\u00e9"},
		{name: "held-back partial character", unread: "ok\xc3", max: 100, want: "ok"},
		{name: "partial character released by close", unread: "ok\xc3", closed: true, max: 100, want: "ok\ufffd"},
		{name: "lost unread bytes", read: "", unread: "0123456789\nabc\n", maxTail: 6, max: 100, want: "9\nabc\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tail := 1000
			if c.maxTail > 0 {
				tail = c.maxTail
			}
			s := newStream(nil, "stdout", tail, 1<<20, 8)
			s.Write([]byte(c.read))
			s.Next()
			s.Write([]byte(c.unread))
			if c.closed {
				s.Close()
			}
			if got := s.Peek(c.max); got != c.want {
				t.Fatalf("Peek(%d) = %q, want %q", c.max, got, c.want)
			}
			if again := s.Peek(c.max); again != c.want {
				t.Fatalf("second Peek = %q: a peek changed the stream", again)
			}
			next, _ := s.Next()
			if len(next) < len(c.want) || next[len(next)-len(c.want):] != c.want {
				t.Fatalf("Next after Peek = %q: does not end with the peeked %q", next, c.want)
			}
		})
	}
}
