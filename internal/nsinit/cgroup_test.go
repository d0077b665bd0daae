//go:build linux

package nsinit_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// cgroupInit starts an init with a cgroup per command, or skips the test
// where cgroup v2 is not writable.
func cgroupInit(t *testing.T) (*nsinit.Init, nsinit.Cgroup) {
	t.Helper()
	cg := nsinit.Probe().Cgroup
	if !cg.Writable {
		t.Skipf("cgroup v2 is not writable here (%+v)", cg)
	}
	o := initOptions()
	o.Cgroup = cg.Dir
	in, err := nsinit.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in, cg
}

// cgroupOf returns the cgroup v2 path of pid, as /proc/<pid>/cgroup says.
func cgroupOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// exited says whether pid is gone or a zombie (which has no cgroup).
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// TestCgroupPerCommand: where cgroup v2 is writable, each command and
// everything it starts (escapees and a fork loop included) run in a
// cgroup of the command's own, which KillLeftovers empties and removes;
// Close removes the session's cgroup.
func TestCgroupPerCommand(t *testing.T) {
	marker := clean(t)
	in, cg := cgroupInit(t)
	loop, beat := forkLoop(t)
	ch, stdout, _ := spawn(t, in, marker, escapees+"; "+loop)
	wait(t, ch)
	testutil.WaitBeating(t, beat)
	testutil.WaitFor(t, 10*time.Second, "the escapees", func() bool { return len(testutil.Processes(marker)) >= 3 })
	var dir string
	checked := 0
	for _, p := range testutil.Processes(marker) {
		got := cgroupOf(p.Pid)
		if got == "" && exited(p.Pid) {
			continue // one of the fork loop's, gone since it was listed
		}
		if q, err := proc.Stat(p.Pid); err != nil || q.StartTime != p.StartTime {
			continue // gone, and its pid another process's (the loop wraps the pids)
		}
		checked++
		if dir == "" {
			dir = got
		}
		if got == "" || got != dir || !strings.Contains(got, "/cmd-") {
			t.Errorf("pid %d (%s) is in cgroup %q; want the command's (%q)", p.Pid, testutil.Cmdline(p.Pid), got, dir)
		}
	}
	if checked < 3 { // the three sleeps at least
		t.Fatalf("%d processes checked, want the escapees' three sleeps at least", checked)
	}
	hostDir := filepath.Join(cg.Mount, dir)
	if _, err := os.Stat(filepath.Join(hostDir, "cgroup.kill")); err != nil {
		t.Fatalf("the command's cgroup: %v", err)
	}
	ch.Release()
	if _, err := os.Stat(hostDir); err != nil {
		t.Errorf("Release removed the cgroup of a command that left processes running: %v", err)
	}
	if err := ch.KillLeftovers(); err != nil {
		t.Fatal(err)
	}
	if testutil.Beating(t, beat) || len(testutil.Processes(marker)) > 0 {
		t.Error("KillLeftovers returned with processes alive")
	}
	if _, err := os.Stat(hostDir); !os.IsNotExist(err) {
		t.Errorf("the emptied cgroup %s was not removed: %v", hostDir, err)
	}
	stdout.text(t)
	session := filepath.Dir(hostDir)
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(session); !os.IsNotExist(err) {
		t.Errorf("Close left the session's cgroup %s: %v", session, err)
	}
}

// TestCgroupClose: Close kills and removes the cgroups of commands still
// running.
func TestCgroupClose(t *testing.T) {
	marker := clean(t)
	in, cg := cgroupInit(t)
	loop, beat := forkLoop(t)
	ch, stdout, _ := spawn(t, in, marker, "sleep 600 & "+loop+"wait")
	testutil.WaitBeating(t, beat)
	// The session's cgroup, from a process of the command that is in
	// one of its command cgroups: the loop's processes live a moment,
	// and with pid_max at 32768 it wraps the pids within seconds, so a
	// pid of the scan may be another process's by the time its cgroup
	// is read (once it named the root's).
	prefix := fmt.Sprintf("conch-%d-", os.Getpid())
	session := ""
	for _, p := range testutil.Processes(marker) {
		c := cgroupOf(p.Pid)
		if dir := filepath.Dir(c); strings.HasPrefix(filepath.Base(c), "cmd-") && strings.HasPrefix(filepath.Base(dir), prefix) {
			session = filepath.Join(cg.Mount, dir)
			break
		}
	}
	if session == "" {
		t.Fatal("no process of the command in a command cgroup of this server")
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if testutil.Beating(t, beat) {
		t.Error("Close returned with the loop alive")
	}
	if _, err := os.Stat(session); !os.IsNotExist(err) {
		t.Errorf("Close left the session's cgroup %s: %v", session, err)
	}
	if _, err := ch.Wait(); err != nsinit.ErrClosed {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
	stdout.text(t)
}

// TestCgroupSweep: an init's start removes the session cgroups a dead
// server left (a SIGKILLed conch cannot remove its own), command cgroups
// included, and leaves those of a live server.
func TestCgroupSweep(t *testing.T) {
	cg := nsinit.Probe().Cgroup
	if !cg.Writable {
		t.Skipf("cgroup v2 is not writable here (%+v)", cg)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(gone.Process.Pid, 0); err != unix.ESRCH {
		t.Skipf("pid %d was reused at once", gone.Process.Pid)
	}
	dead := filepath.Join(cg.Dir, fmt.Sprintf("conch-%d-5ca1ab1e", gone.Process.Pid))
	live := filepath.Join(cg.Dir, fmt.Sprintf("conch-%d-5ca1ab1e", os.Getpid()))
	for _, d := range []string{dead, filepath.Join(dead, "cmd-1"), live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(dead, "cmd-1"), dead, live} {
			unix.Rmdir(d)
		}
	})
	cgroupInit(t)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead server's cgroup %s: %v, want it removed", dead, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live server's cgroup %s: %v, want it kept", live, err)
	}
}
