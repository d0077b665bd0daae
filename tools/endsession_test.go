//go:build linux

package tools_test

import (
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// EndSession disposes of the session's tasks and kills what its
// foreground commands left running (an escapee included), and leaves
// another session's alone.
func TestEndSessionKillsWhatTheSessionLeft(t *testing.T) {
	e := newEnv(t, envOpts{})
	other := tools.Session{ID: "session-b", Cwd: e.dir}
	wantOK(t, e.bash("setsid sleep 1030 >/dev/null 2>&1 & sleep 1031 >/dev/null 2>&1 &"))
	id := e.background(e.sess, "sleep 1032")
	time.Sleep(50 * time.Millisecond) // the sessions' commands must not overlap in time
	wantOK(t, e.callAs(other, tools.NameBash, map[string]any{"command": "sleep 1033 >/dev/null 2>&1 &", "description": "Leave a sleep running"}))
	count := func(arg string) int {
		n := 0
		for _, p := range testutil.Processes(e.marker) {
			if testutil.Cmdline(p.Pid) == "sleep "+arg {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 5*time.Second, "the sleeps to start", func() bool {
		return count("1030")+count("1031")+count("1032")+count("1033") >= 4
	})
	e.ts.EndSession(e.sess.ID)
	for _, a := range []string{"1030", "1031", "1032"} {
		if n := count(a); n != 0 {
			t.Errorf("sleep %s of the ended session survived EndSession", a)
		}
	}
	if n := count("1033"); n != 1 {
		t.Errorf("the other session's sleep: %d alive, want 1", n)
	}
	r := e.call(tools.NameTaskOutput, map[string]any{"task_id": id})
	if !r.IsError {
		t.Errorf("task %s still known after EndSession: %q", id, r.Text)
	}
}
