//go:build linux

package nsinit_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// serverHelper is a server that starts an init, leaves escapees and a
// fork loop in it, says "ready" and waits to be killed.
func serverHelper() int {
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Println(err)
		return 1
	}
	in, err := nsinit.Start(initOptions())
	if err != nil {
		fmt.Println(err)
		return 1
	}
	marker := os.Getenv(testutil.MarkerEnv)
	for _, script := range []string{escapees, os.Getenv(loopEnv) + "sleep 600"} {
		if _, err := in.Spawn(nsinitCommand(marker, script, nil, nil, nil)); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}

// loopEnv carries the fork loop's command to serverHelper.
const loopEnv = "NSINIT_TEST_LOOP"

// TestServerKilled: a SIGKILLed server leaves nothing behind, escapees
// and a fork loop included: the init dies of its parent-death signal and
// the kernel kills its namespace.
func TestServerKilled(t *testing.T) {
	marker := clean(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	loop, beat := forkLoop(t)
	cmd.Env = append(testutil.Env(marker), "NSINIT_TEST_HELPER=server", noRaceSleep, loopEnv+"="+loop)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := proc.StartCmd(cmd); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		proc.WaitCmd(cmd)
		t.Fatalf("server: %q", line)
	}
	testutil.WaitFor(t, 10*time.Second, "the escapees", func() bool { return len(testutil.Processes(marker)) >= 5 })
	testutil.WaitBeating(t, beat)
	t0 := time.Now()
	cmd.Process.Kill()
	proc.WaitCmd(cmd)
	testutil.WaitFor(t, 2*time.Second, "the namespace to empty", func() bool { return len(testutil.Processes(marker)) == 0 })
	t.Logf("the namespace was empty %v after the server's SIGKILL", time.Since(t0))
	if testutil.Beating(t, beat) {
		t.Error("the fork loop outlived the server")
	}
}

// degradedHelper runs in a user namespace of its own: it allows no more
// user namespaces there, then tries to probe and start an init.
func degradedHelper() int {
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
		fmt.Println("set-up:", err)
		return 1
	}
	fmt.Println("summary:", nsinit.Probe().Summary())
	in, err := nsinit.Start(initOptions())
	if err == nil {
		in.Close()
		fmt.Println("started")
		return 0
	}
	fmt.Println("unavailable:", errors.Is(err, nsinit.ErrUnavailable))
	fmt.Println("error:", err)
	return 0
}

// TestUserNamespacesOff: on a host where user namespaces are off (here a
// user namespace whose user.max_user_namespaces is 0), Start fails with
// an error that names the cause, and Probe says containment is none.
func TestUserNamespacesOff(t *testing.T) {
	marker := clean(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(testutil.Env(marker), "NSINIT_TEST_HELPER=degraded", noRaceSleep)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	const cause = "user namespaces are disabled (user.max_user_namespaces = 0): "
	got := string(out)
	for _, want := range []string{
		"summary: none (" + cause,
		"unavailable: true\n",
		"error: " + cause + "nsinit: start the init /proc/self/exe: fork/exec /proc/self/exe: no space left on device\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("helper output lacks %q:\n%s", want, got)
		}
	}
}

// TestProbe: this host allows user and PID namespaces, and Probe finds
// cgroup v2 where /proc/self/mountinfo says it is.
func TestProbe(t *testing.T) {
	r := nsinit.Probe()
	if r.UserNS != nil || r.PIDNS != nil {
		t.Fatalf("Probe: user namespaces %v, PID namespaces %v", r.UserNS, r.PIDNS)
	}
	want := "pid-namespace"
	if r.Cgroup.Writable {
		want = "pid-namespace, cgroup"
	}
	if got := r.Summary(); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mi), " - cgroup2 ") {
		if r.Cgroup.Mount != "" {
			t.Errorf("no cgroup2 in mountinfo, Probe found %q", r.Cgroup.Mount)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(r.Cgroup.Dir, "cgroup.procs")); err != nil {
		t.Errorf("Probe: cgroup %+v: %v", r.Cgroup, err)
	}
	t.Logf("cgroup v2: %+v", r.Cgroup)
}
