//go:build linux

package shelltest

import (
	"os"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
)

// testBinaryOutput: a stream that is mostly NUL or control bytes is
// Binary, with a spill file holding all of it however short, in a Result
// and in a read; a text stream is not.
func testBinaryOutput(t *testing.T, su *suite) {
	ex, _ := su.exec(t, Config{})
	r := MustRun(t, ex, shell.Request{Command: "printf 'ab\\0\\1\\2\\3\\n'; echo text >&2"})
	if !r.Stdout.Binary || r.Stderr.Binary || r.Stdout.SpillPath == "" || r.Stdout.Size != 7 {
		t.Fatalf("stdout %+v, stderr %+v; want stdout binary with its spill file, stderr text", r.Stdout, r.Stderr)
	}
	if b, err := os.ReadFile(r.Stdout.SpillPath); err != nil || string(b) != "ab\x00\x01\x02\x03\n" {
		t.Errorf("spill file %q, %v; want the 7 bytes", b, err)
	}
	p := MustStart(t, ex, shell.Request{Command: "head -c 9000 /dev/zero"})
	WaitDone(t, p, 10*time.Second)
	rd := p.Read()
	if !rd.StdoutBinary || rd.StderrBinary || rd.StdoutSpill == "" {
		t.Errorf("read %+v; want stdout binary, named", shell.ReadResult{StdoutBinary: rd.StdoutBinary, StderrBinary: rd.StderrBinary, StdoutSpill: rd.StdoutSpill})
	}
}
