package capture

// A stream is binary when more than a tenth of its first BinaryProbe
// bytes (or of all of it, when it is shorter) are NUL or control bytes
// that text does not use (docs/tools.md#binary-output). A model is then
// shown a line naming its size and its file rather than the bytes, so a
// binary stream always gets a spill file, however short.

// BinaryProbe is how much of a stream's start decides whether it is
// binary.
const BinaryProbe = 8 << 10

// controlByte reports whether b is a NUL or a control byte that text
// does not use: tab, line feed, carriage return and escape (colours,
// cursor moves) are text's. (Random bytes then hold 11%: 29 of 256.)
func controlByte(b byte) bool {
	switch b {
	case '\t', '\n', '\r', 0x1b:
		return false
	}
	return b < 0x20 || b == 0x7f
}

// probeLocked counts the control bytes of p, the bytes that take the
// stream from s.total on, while the stream is within its probe.
func (s *Stream) probeLocked(p []byte) {
	if s.total >= BinaryProbe {
		return
	}
	for _, b := range p[:min(int64(len(p)), BinaryProbe-s.total)] {
		if controlByte(b) {
			s.controls++
		}
	}
}

// decideLocked makes the stream binary once its probe is complete (full,
// or closed) with too many control bytes, and then starts its spill
// file at once if it has none: the ring still holds the whole stream,
// which has not overflowed.
func (s *Stream) decideLocked() {
	if s.decided || s.total < BinaryProbe && !s.closed || s.total == 0 {
		return
	}
	s.decided = true
	s.binary = s.controls*10 > min(s.total, BinaryProbe)
	if s.binary && s.state == spillNone {
		s.openSpillLocked(s.total)
	}
}

// Binary reports whether the stream is binary, as far as its bytes so
// far tell.
func (s *Stream) Binary() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.binary
}
