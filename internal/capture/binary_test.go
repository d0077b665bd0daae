package capture

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// TestBinary: a stream with more than a tenth of NUL or control bytes in
// its first 8 KiB is binary, decided once the probe is full or at the
// close, and then has a spill file with every byte, however short;
// coloured text, tabs and a stray NUL are text.
func TestBinary(t *testing.T) {
	random := make([]byte, 20000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.UintN(256))
	}
	colours := []byte(strings.Repeat("\x1b[01;34mdir\x1b[0m\tfile\r\n", 500))
	for _, c := range []struct {
		name   string
		data   []byte
		binary bool
	}{
		{"random bytes", random, true},
		{"a short binary", []byte("\x00\x01\x02abcdefgh"), true},
		{"coloured text", colours, false},
		{"a stray NUL", append(bytes.Repeat([]byte("text\n"), 100), 0), false},
		{"NULs after the probe", append(bytes.Repeat([]byte("x"), BinaryProbe), bytes.Repeat([]byte{0}, 5000)...), false},
		{"empty", nil, false},
	} {
		d := NewDir(t.TempDir(), 1<<30)
		s := NewStream(d, "stdout", 64000, 1<<30)
		for p := c.data; len(p) > 0; {
			n := min(len(p), 1000)
			s.Write(p[:n])
			p = p[n:]
			if len(c.data) > BinaryProbe && int(s.Len()) >= BinaryProbe && s.Binary() != c.binary {
				t.Errorf("%s: Binary() = %v once the probe is full", c.name, s.Binary())
			}
		}
		s.Close()
		out := s.Output()
		if out.Binary != c.binary || s.Binary() != c.binary {
			t.Errorf("%s: Binary %v, want %v", c.name, out.Binary, c.binary)
		}
		if !c.binary {
			if out.SpillPath != "" {
				t.Errorf("%s: a text stream within the tail has a spill file", c.name)
			}
			d.Close()
			continue
		}
		if b, err := os.ReadFile(out.SpillPath); err != nil || !bytes.Equal(b, c.data) {
			t.Errorf("%s: spill file %q: %d bytes, %v; want the whole stream", c.name, out.SpillPath, len(b), err)
		}
		d.Close()
	}
}
