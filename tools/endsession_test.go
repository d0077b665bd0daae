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

// EndSession reaches the remote hosts: what the session's commands left
// running on a host is killed there too, another session's is not.
func TestEndSessionKillsWhatTheSessionLeftOnAHost(t *testing.T) {
	marker := testutil.Marker(t)
	gpu, _ := pipeHost(t, "gpu1", marker, "/")
	e := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{gpu}}})
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	other := tools.Session{ID: "session-b", Cwd: e.dir}
	on := func(s tools.Session, cmd string) {
		wantOK(t, e.callAs(s, tools.NameBash, map[string]any{"command": cmd, "description": "Leave a sleep running", "host": "gpu1"}))
	}
	on(e.sess, "setsid sleep 1040 >/dev/null 2>&1 & sleep 1041 >/dev/null 2>&1 &")
	time.Sleep(50 * time.Millisecond) // the sessions' commands must not overlap in time
	on(other, "sleep 1043 >/dev/null 2>&1 &")
	count := func(arg string) int {
		n := 0
		for _, p := range testutil.Processes(marker) {
			if testutil.Cmdline(p.Pid) == "sleep "+arg {
				n++
			}
		}
		return n
	}
	testutil.WaitFor(t, 5*time.Second, "the sleeps to start", func() bool {
		return count("1040")+count("1041")+count("1043") >= 3
	})
	e.ts.EndSession(e.sess.ID)
	for _, a := range []string{"1040", "1041"} {
		if n := count(a); n != 0 {
			t.Errorf("sleep %s of the ended session survived EndSession on the host", a)
		}
	}
	if n := count("1043"); n != 1 {
		t.Errorf("the other session's sleep on the host: %d alive, want 1", n)
	}
	e.ts.EndSession(other.ID)
	if n := count("1043"); n != 0 {
		t.Errorf("sleep 1043 survived its session's end")
	}
}
