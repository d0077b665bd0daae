//go:build linux

package proc_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestSparedDaemons: a program conch runs itself (a container engine,
// claimed and tracked by no command) daemonizes a process of a spared
// executable and one of another, both re-parented to us while a tracked
// command runs. A kill of all takes the command and the other escapee,
// not the daemon; no leftover check counts it; and when it ends, it is
// reaped. A file of the same name that root does not own, or that others
// may write (a command's copy of sleep), is not spared.
func TestSparedDaemons(t *testing.T) {
	if os.Geteuid() != 0 {
		// Only a file of root's is spared, and an impostor is another
		// user's: neither can an ordinary user make.
		t.Skip("needs root: the spared daemon's file must be root's")
	}
	marker := clean(t)
	const name = "conch-test-spared-daemon"
	daemon := filepath.Join(t.TempDir(), name)
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(daemon, sleep, 0o755); err != nil {
		t.Fatal(err)
	}
	// Impostors: the same name, in files a command could have made (not
	// root's, or writable by others).
	var impostors []string
	for i, fix := range []func(string) error{
		func(f string) error { return os.Chown(f, 65534, 65534) },
		func(f string) error { return os.Chmod(f, 0o777) },
	} {
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, sleep, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fix(f); err != nil {
			t.Fatal(err)
		}
		impostors = append(impostors, fmt.Sprintf("%s %d", f, 1003+i))
	}
	proc.SpareDaemons(name)

	tr := proc.NewTracker()
	running := startSession(t, marker, "sleep 1000 & wait")
	tr.Add(running.Process.Pid, "")
	done := waitAsync(running)
	// The daemon becomes one 300 ms after it was re-parented to us: the
	// scans of that time (the exit of the re-parented `sleep 0.1` makes
	// one) see a shell, not a spared executable, and charge its session
	// to the running command, as a scan that meets a daemon in the middle
	// of its exec does (one CI run's failure).
	engine := startSession(t, marker, "setsid sh -c 'sleep 0.3; exec "+daemon+" 1001' & setsid sleep 0.1 & setsid sleep 1002 & setsid "+impostors[0]+" & setsid "+impostors[1]+" &")
	if err := proc.WaitCmd(engine); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "both escapees re-parented to us", func() bool {
		return len(withCmdline(marker, daemon+" 1001")) == 1 && len(withCmdline(marker, "sleep 1002")) == 1 &&
			len(withCmdline(marker, impostors[0])) == 1 && len(withCmdline(marker, impostors[1])) == 1
	})
	if tr.MayHaveLeftovers(running.Process.Pid) != true {
		t.Error("MayHaveLeftovers with an unowned escapee = false")
	}
	// A command of ours whose shell runs the spared executable itself is
	// a command, not the engine's daemon: a kill takes it. (Started after
	// the escapees, which stay the running command's alone.)
	execd := startSession(t, marker, "exec "+daemon+" 1004")
	tr.Add(execd.Process.Pid, "")
	execdDone := waitAsync(execd)
	testutil.WaitFor(t, 5*time.Second, "the command's exec", func() bool {
		return len(withCmdline(marker, daemon+" 1004")) == 1
	})

	tr.KillAll(100 * time.Millisecond)
	if err := recv(t, done); !signalled(err, syscall.SIGTERM) {
		t.Errorf("the tracked command: Wait = %v, want killed by SIGTERM", err)
	}
	if err := recv(t, execdDone); !signalled(err, syscall.SIGTERM) {
		t.Errorf("the tracked command that runs the spared executable: Wait = %v, want killed by SIGTERM", err)
	}
	if n := len(withCmdline(marker, "sleep 1002")); n != 0 {
		t.Error("KillAll left the escapee of an unspared executable")
	}
	for _, imp := range impostors {
		if n := len(withCmdline(marker, imp)); n != 0 {
			t.Errorf("KillAll spared an impostor named as the daemon: %s", imp)
		}
	}
	d := withCmdline(marker, daemon+" 1001")
	if len(d) != 1 {
		t.Fatalf("KillAll took the spared daemon (%d left)", len(d))
	}
	if p, err := proc.Stat(d[0].Pid); err != nil || p.PPid != os.Getpid() {
		t.Fatalf("the spared daemon: %+v, %v; want a child of ours", p, err)
	}
	check := startSession(t, marker, "true")
	tr.Add(check.Process.Pid, "")
	if err := proc.WaitCmd(check); err != nil {
		t.Fatal(err)
	}
	if tr.MayHaveLeftovers(check.Process.Pid) {
		t.Error("MayHaveLeftovers of a command that left nothing = true while a spared daemon is our child")
	}

	// Its end: the orphan reaper reaps it.
	if err := syscall.Kill(d[0].Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the spared daemon reaped", func() bool {
		_, err := proc.Stat(d[0].Pid)
		return err != nil
	})
}
