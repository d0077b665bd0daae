// Package frame is what conch's two protocols of its own share: the one
// between the server and a session's init (internal/nsinit) and the one
// between conch and `conch agent` on a host (internal/agent). Each keeps
// its own messages; both frame them the same way and match answers to
// requests the same way.
//
// A frame is a 4-byte big-endian length, then that many bytes of one
// JSON object. Each protocol bounds a frame's length: a peer that is not
// conch, or a broken stream, must not make the other side allocate
// without bound.
//
// Calls is the table of requests awaiting their answer: a request gets a
// fresh ID, its answer is delivered to whoever waits for that ID, and
// when the stream ends every waiter learns why.
package frame

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a frame's length.
const HeaderSize = 4

// ErrTooLarge is returned for a frame longer than its protocol's bound.
var ErrTooLarge = errors.New("frame too large")

// Encode returns v's frame: its length, then its JSON encoding. A body
// longer than max is ErrTooLarge.
func Encode(v any, max int) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(body) > max {
		return nil, ErrTooLarge
	}
	b := make([]byte, HeaderSize+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[HeaderSize:], body)
	return b, nil
}

// Cut takes the first frame off buf: its body and what follows it. ok is
// false while buf holds less than a whole frame; a length over max is
// ErrTooLarge, known from the header alone.
func Cut(buf []byte, max int) (body, rest []byte, ok bool, err error) {
	if len(buf) < HeaderSize {
		return nil, buf, false, nil
	}
	n := binary.BigEndian.Uint32(buf)
	if uint64(n) > uint64(max) {
		return nil, buf, false, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	end := HeaderSize + int(n)
	if len(buf) < end {
		return nil, buf, false, nil
	}
	return buf[HeaderSize:end], buf[end:], true, nil
}

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	max int
	buf []byte
}

// NewReader returns a Reader of r's frames, each at most max bytes.
func NewReader(r io.Reader, max int) *Reader { return &Reader{r: r, max: max} }

// keepBuffer is the largest body buffer kept between frames: one 10 MB
// stdin must not pin 10 MB for the life of the connection.
const keepBuffer = 64 << 10

// Read reads the next frame into v. It returns io.EOF when the stream
// ended cleanly between frames, io.ErrUnexpectedEOF inside one, and
// ErrTooLarge (wrapped) for a length over the bound.
func (r *Reader) Read(v any) error {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(r.max) {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	body := r.buf[:n]
	if _, err := io.ReadFull(r.r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if n > keepBuffer {
		r.buf = nil
	}
	return json.Unmarshal(body, v)
}
