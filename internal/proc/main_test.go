//go:build linux

package proc_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestMain makes the test binary what the server is: a child subreaper
// running the orphan reaper. Every test therefore starts children that
// leave our group with proc.StartCmd, as the executor does.
func TestMain(m *testing.M) {
	if os.Getenv(scanFailHelperEnv) != "" {
		os.Exit(scanFailHelper())
	}
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testutil.VerifyTestMain(m)
}

// clean returns a fresh marker and registers the checks every process
// test ends with: nothing carrying the marker survives, no goroutine
// leaked.
func clean(t *testing.T) string {
	t.Helper()
	marker := testutil.Marker(t)
	t.Cleanup(func() {
		testutil.AssertNoProcesses(t, marker)
		testutil.VerifyNoLeaks(t)
	})
	return marker
}

// startSession starts `bash -c script` the way the local executor does: a
// new session (pgid == sid == pid), a parent-death signal, the marker in
// its environment, claimed under the spawn lock.
func startSession(t *testing.T, marker, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = testutil.Env(marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := proc.StartCmd(cmd); err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	return cmd
}

// waitAsync waits for cmd in the background, as the executor does.
func waitAsync(cmd *exec.Cmd) <-chan error {
	done := make(chan error, 1)
	go func() { done <- proc.WaitCmd(cmd) }()
	return done
}

func recv(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("command did not end within 10 s")
		return nil
	}
}

// withCmdline returns the live processes carrying marker whose command
// line is exactly cmdline. Each is read again after its command line
// matched: a process found while it was still the forked shell (before
// it exec'd, or before setsid) has moved on by then.
func withCmdline(marker, cmdline string) []proc.Info {
	var out []proc.Info
	for _, p := range testutil.Processes(marker) {
		if testutil.Cmdline(p.Pid) != cmdline {
			continue
		}
		if now, err := proc.Stat(p.Pid); err == nil && now.StartTime == p.StartTime && now.Alive() {
			out = append(out, now)
		}
	}
	return out
}

func signalled(err error, sig syscall.Signal) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func TestSignalName(t *testing.T) {
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGTERM: "SIGTERM",
		syscall.SIGKILL: "SIGKILL",
		syscall.SIGINT:  "SIGINT",
		syscall.SIGHUP:  "SIGHUP",
		syscall.SIGSEGV: "SIGSEGV",
		200:             "SIG200",
	} {
		if got := proc.SignalName(sig); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", int(sig), got, want)
		}
	}
	if got := proc.SignalName(40); !strings.HasPrefix(got, "SIG") {
		t.Errorf("SignalName(40) = %q, want a SIG name", got)
	}
}
