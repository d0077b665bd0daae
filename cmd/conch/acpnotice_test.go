//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestACPNoticePushed: conch acp tells a session of its background task's
// end without being asked, through the task runtime's OnNotice hook to the
// agent built after it (acp.go): a prompt starts `&true`, and the notice
// naming `/output bash-1` arrives on its own, whether before the prompt's
// response or after it.
func TestACPNoticePushed(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	stdin, stdout, stream := startRecorded(t, testutil.Conch(t, marker, "acp", "--containment", "off"), marker, false)
	acp := newACPScript(t, stdin, stdout)
	sid := acp.session(t.TempDir())
	if sid == "" {
		t.Fatalf("no session:\n%s", stream.String())
	}
	if got := acp.card(sid, "&true"); got != "started background task bash-1" {
		t.Fatalf("the background prompt: %q", got)
	}
	const notice = "`/output bash-1`"
	if strings.Contains(strings.Join(acp.notes, ""), notice) {
		return
	}
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		for {
			line, err := acp.lines.ReadString('\n')
			if err != nil {
				return
			}
			if strings.Contains(line, notice) {
				lines <- line
				return
			}
		}
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("conch acp ended before the notice:\n%s", stream.String())
		}
		if !strings.Contains(line, `"sessionId":"`+sid+`"`) {
			t.Errorf("the notice is not the session's: %s", line)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no notice of bash-1's end within 60s:\n%s", stream.String())
	}
}
