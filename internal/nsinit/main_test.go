//go:build linux

package nsinit_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// helperEnv makes the test binary a helper instead of running the tests:
// "init" is the init itself (what `conch __init` runs), "server" a server
// that a test SIGKILLs, "degraded" a process in a user namespace that
// allows no more user namespaces, "nolandlock" a process whose kernel
// seems to lack Landlock.
const helperEnv = "NSINIT_TEST_HELPER"

// TestMain dispatches the helpers, and otherwise makes the test binary
// what the server is: a child subreaper running the orphan reaper.
func TestMain(m *testing.M) {
	// The init package prestart started for a helper run with a conch
	// run's arguments (prestart_test.go), as conch's entry runs it.
	if len(os.Args) == 2 && os.Args[1] == nsinit.HelperArg {
		os.Exit(nsinit.Main())
	}
	switch os.Getenv(helperEnv) {
	case "prestart-start":
		os.Exit(prestartStartHelper())
	case "prestart-close":
		os.Exit(prestartCloseHelper())
	case "init":
		os.Exit(nsinit.Main())
	case "init-no-reaper":
		nsinit.NoReaper()
		os.Exit(nsinit.Main())
	case "init-slow-tail":
		nsinit.SlowSpawnTail(100 * time.Millisecond)
		os.Exit(nsinit.Main())
	case "server":
		os.Exit(serverHelper())
	case "degraded":
		os.Exit(degradedHelper())
	case "nolandlock":
		os.Exit(noLandlockHelper())
	case "nonotify":
		os.Exit(noNotifyHelper())
	case "race-open":
		os.Exit(raceOpenHelper())
	case "race-connect":
		os.Exit(raceConnectHelper())
	case "race-fdswap":
		os.Exit(raceFDSwapHelper())
	case "selfsock":
		os.Exit(selfSocketHelper())
	case "dial":
		os.Exit(dialHelper())
	case "connect-wait":
		os.Exit(connectWaitHelper())
	case "nooverlay":
		proc.BecomeSubreaper()
		os.Exit(noOverlayHelper(m))
	}
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	startUnprivileged()
	testutil.VerifyTestMain(m, stopUnprivileged)
}

// initOptions start this test binary as the init. Under -race, a
// process sleeps a second at exit unless GORACE says otherwise.
func initOptions() *nsinit.Options {
	return &nsinit.Options{Env: []string{helperEnv + "=init", noRaceSleep}, Stderr: os.Stderr}
}

const noRaceSleep = "GORACE=atexit_sleep_ms=0"

// clean returns a fresh marker and registers the checks every process
// test ends with: nothing carrying the marker survives, no goroutine
// leaked. Cleanups run last-in first-out, so register it before
// startInit.
func clean(t *testing.T) string {
	t.Helper()
	marker := testutil.Marker(t)
	t.Cleanup(func() {
		testutil.AssertNoProcesses(t, marker)
		testutil.VerifyNoLeaks(t)
	})
	return marker
}

func startInit(t *testing.T) *nsinit.Init {
	t.Helper()
	return startInitAs(t, "init")
}

// startInitAs starts this test binary as an init in helper mode mode
// (TestMain's "init-slow-tail", "init-no-reaper").
func startInitAs(t *testing.T, mode string) *nsinit.Init {
	t.Helper()
	o := initOptions()
	o.Env = []string{helperEnv + "=" + mode, noRaceSleep}
	in, err := nsinit.Start(o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

// output is a command's captured stdout or stderr.
type output struct {
	r    *os.File
	buf  bytes.Buffer
	done chan struct{}
}

func capture(t *testing.T) (*output, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	o := &output{r: r, done: make(chan struct{})}
	go func() {
		io.Copy(&o.buf, r)
		r.Close()
		close(o.done)
	}()
	return o, w
}

// text waits (at most 10 s) until every writer closed the pipe.
func (o *output) text(t *testing.T) string {
	t.Helper()
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		o.r.Close()
		<-o.done
		t.Fatal("output still open after 10 s")
	}
	return o.buf.String()
}

// spawn starts `bash -c script` with the marker, its stdout and stderr
// captured; the caller waits and releases.
func spawn(t *testing.T, in *nsinit.Init, marker, script string) (*nsinit.Child, *output, *output) {
	t.Helper()
	stdout, ow := capture(t)
	stderr, ew := capture(t)
	ch, err := in.Spawn(nsinitCommand(marker, script, nil, ow, ew))
	ow.Close()
	ew.Close()
	if err != nil {
		t.Fatalf("Spawn %q: %v", script, err)
	}
	return ch, stdout, stderr
}

// nsinitCommand is `bash -c script` in /tmp with the marker and FOO=bar
// in its environment.
func nsinitCommand(marker, script string, stdin, stdout, stderr *os.File) nsinit.Command {
	return nsinit.Command{
		Path:   bashPath,
		Args:   []string{"bash", "-c", script},
		Env:    append(os.Environ(), testutil.MarkerEnv+"="+marker, "FOO=bar"),
		Dir:    "/tmp",
		Stdin:  stdin,
		Stdout: stdout,
		Stderr: stderr,
	}
}

var bashPath = func() string {
	p, err := exec.LookPath("bash")
	if err != nil {
		return "/bin/bash"
	}
	return p
}()

// run runs script to its end and returns its wait status and output.
func run(t *testing.T, in *nsinit.Init, marker, script string) (syscall.WaitStatus, string, string) {
	t.Helper()
	ch, stdout, stderr := spawn(t, in, marker, script)
	ws := wait(t, ch)
	out, errOut := stdout.text(t), stderr.text(t)
	ch.Release()
	return ws, out, errOut
}

func wait(t *testing.T, ch *nsinit.Child) syscall.WaitStatus {
	t.Helper()
	return waitFor(t, ch, 10*time.Second)
}

// waitFor is wait for a command that may take up to d (a build).
func waitFor(t *testing.T, ch *nsinit.Child, d time.Duration) syscall.WaitStatus {
	t.Helper()
	select {
	case <-ch.Exited():
	case <-time.After(d):
		t.Fatalf("command did not exit within %v", d)
	}
	ws, err := ch.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return ws
}
