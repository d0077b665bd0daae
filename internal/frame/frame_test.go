package frame_test

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/frame"
)

type msg struct {
	ID   uint64 `json:"id"`
	Text string `json:"text"`
}

// Frames written one after another come back whole and in order, from a
// stream read a byte at a time as from one that holds them all; Cut takes
// them off a buffer, leaving a partial one for later.
func TestRoundTrip(t *testing.T) {
	var stream []byte
	want := []msg{{1, "a"}, {2, string(make([]byte, 100<<10))}, {3, "é\x00"}}
	for _, m := range want {
		b, err := frame.Encode(m, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
	}
	for _, r := range []io.Reader{bytes.NewReader(stream), io.MultiReader(oneByte(stream)...)} {
		fr := frame.NewReader(r, 1<<20)
		for _, w := range want {
			var got msg
			if err := fr.Read(&got); err != nil || got != w {
				t.Fatalf("read: %v, %d %q; want %d", err, got.ID, got.Text[:min(len(got.Text), 8)], w.ID)
			}
		}
		if err := fr.Read(new(msg)); err != io.EOF {
			t.Errorf("after the last frame: %v, want io.EOF", err)
		}
	}
	buf := stream[:len(stream)-1]
	for k := 0; k < 2; k++ {
		body, rest, ok, err := frame.Cut(buf, 1<<20)
		if !ok || err != nil || len(body) == 0 {
			t.Fatalf("cut %d: ok %v, %v", k, ok, err)
		}
		buf = rest
	}
	if _, rest, ok, err := frame.Cut(buf, 1<<20); ok || err != nil || len(rest) != len(buf) {
		t.Errorf("a partial frame: ok %v, %v", ok, err)
	}
}

func oneByte(b []byte) []io.Reader {
	rs := make([]io.Reader, len(b))
	for i := range b {
		rs[i] = bytes.NewReader(b[i : i+1])
	}
	return rs
}

// A length over the bound is refused from the header, before anything
// is allocated or read; a stream cut inside a frame is unexpected.
func TestBounds(t *testing.T) {
	if _, err := frame.Encode(msg{Text: "0123456789"}, 10); !errors.Is(err, frame.ErrTooLarge) {
		t.Errorf("encode over the bound: %v", err)
	}
	hdr := []byte{0x7f, 0xff, 0xff, 0xff}
	if _, _, _, err := frame.Cut(hdr, 1<<20); !errors.Is(err, frame.ErrTooLarge) {
		t.Errorf("cut over the bound: %v", err)
	}
	if err := frame.NewReader(bytes.NewReader(hdr), 1<<20).Read(new(msg)); !errors.Is(err, frame.ErrTooLarge) {
		t.Errorf("read over the bound: %v", err)
	}
	b, _ := frame.Encode(msg{Text: "x"}, 100)
	if err := frame.NewReader(bytes.NewReader(b[:len(b)-1]), 100).Read(new(msg)); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut frame: %v", err)
	}
	if err := frame.NewReader(bytes.NewReader(b[:2]), 100).Read(new(msg)); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut header: %v", err)
	}
}

// Answers reach their callers whatever their order; Fail ends the calls
// still waiting and every later one with the first error.
func TestCalls(t *testing.T) {
	var c frame.Calls[string]
	type call struct {
		id uint64
		ch <-chan string
	}
	var calls []call
	for range 3 {
		id, ch, err := c.Begin()
		if err != nil || id == 0 {
			t.Fatalf("begin: %d, %v", id, err)
		}
		calls = append(calls, call{id, ch})
	}
	if !c.Answer(calls[2].id, "two") || !c.Answer(calls[0].id, "zero") {
		t.Fatal("answer of a waiting call")
	}
	if c.Answer(calls[0].id, "again") || c.Answer(99, "none") {
		t.Error("an answer nobody waits for was delivered")
	}
	if got := <-calls[2].ch; got != "two" {
		t.Errorf("call 2: %q", got)
	}
	if got := <-calls[0].ch; got != "zero" {
		t.Errorf("call 0: %q", got)
	}
	c.Forget(calls[1].id)
	id, ch, _ := c.Begin()
	lost, other := errors.New("lost"), errors.New("other")
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, ok := <-ch; ok {
			t.Error("a failed call got an answer")
		}
	})
	if err := c.Fail(lost); err != lost {
		t.Errorf("fail: %v", err)
	}
	wg.Wait()
	if err := c.Fail(other); err != lost || c.Err() != lost {
		t.Errorf("second fail: %v, Err %v; want the first", err, c.Err())
	}
	if _, _, err := c.Begin(); err != lost {
		t.Errorf("begin after fail: %v", err)
	}
	if c.Answer(id, "late") {
		t.Error("an answer after fail was delivered")
	}
}
