//go:build linux

package tools_test

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/conch-dev/conch/tools"
)

var binarySpill = regexp.MustCompile(`full output: (/\S+)\]`)

// TestBinaryOutput: a stream that is mostly not text reaches the model as
// one line with its size and its file, in a foreground result (short or
// long, stdout or stderr), a task's read and its notice; the file holds
// every byte; coloured text stays text (docs/tools.md#binary-output).
func TestBinaryOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.bash("head -c 10089 /dev/zero; printf 'ok\\n' >&2")
	wantOK(t, r)
	golden(t, "foreground", scrub(r.Text, nil))
	m := binarySpill.FindStringSubmatch(r.Text)
	if m == nil {
		t.Fatalf("no file named: %q", r.Text)
	}
	if b, err := os.ReadFile(m[1]); err != nil || !bytes.Equal(b, make([]byte, 10089)) {
		t.Errorf("the file: %d bytes, %v; want the 10089 NULs", len(b), err)
	}
	if v := r.Value.(tools.ForegroundValue); v.Stdout.Text != "[binary output: 10089 bytes; full output: "+m[1]+"]" || v.Stdout.Bytes != 10089 || v.Stdout.SpillPath != m[1] {
		t.Errorf("structured stdout %+v", v.Stdout)
	}
	r = e.bash("printf 'ab\\0\\1\\2\\n' >&2; exit 4")
	golden(t, "short stderr", scrub(r.Text, nil))
	if r := e.bash("for i in $(seq 300); do printf '\\033[01;34mdir\\033[0m\\tfile\\n'; done | tail -2"); r.Text != "dir\tfile\ndir\tfile\n" {
		t.Errorf("coloured text: %q", r.Text)
	}
	// Held until its start call is back, so its notice rides on the next
	// call (see TestTaskLeftovers).
	id := e.background(e.sess, "until [ -e gate ]; do sleep 0.01; done; head -c 9000 /dev/zero | tr '\\0' '\\1'")
	writeGate(t, e.dir)
	e.settle(e.sess, id)
	n := e.call(tools.NameTaskList, map[string]any{}).Notices
	if len(n) != 1 {
		t.Fatalf("notices %v", n)
	}
	golden(t, "notice", scrub(noticeTexts(n)[0], nil))
	golden(t, "task_output", scrub(e.call(tools.NameTaskOutput, map[string]any{"task_id": id}).Text, nil))
}
