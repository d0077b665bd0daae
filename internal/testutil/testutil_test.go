//go:build linux

package testutil_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestMarker(t *testing.T) {
	a, b := testutil.Marker(t), testutil.Marker(t)
	if a == b {
		t.Errorf("two markers are equal: %q", a)
	}
	ok := regexp.MustCompile(`^conchtest_TestMarker_[0-9a-f]{16}$`)
	if !ok.MatchString(a) {
		t.Errorf("Marker = %q", a)
	}
	t.Run("odd name/with spaces and 'quotes' and a very long tail that goes on", func(t *testing.T) {
		m := testutil.Marker(t)
		if !regexp.MustCompile(`^conchtest_[A-Za-z0-9_]{1,40}_[0-9a-f]{16}$`).MatchString(m) {
			t.Errorf("Marker = %q: want only [A-Za-z0-9_] and a bounded length", m)
		}
	})
}

func TestProcessesAndAssert(t *testing.T) {
	byEnv := testutil.Marker(t)
	byArg := testutil.Marker(t)

	env := exec.Command("sleep", "600")
	env.Env = testutil.Env(byEnv)
	// bash's $0 puts the marker in its command line only; it blocks
	// reading a pipe we hold, with no child.
	arg := exec.Command("bash", "-c", "read line", byArg)
	stdin, err := arg.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	for _, cmd := range []*exec.Cmd{env, arg} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if got := pids(testutil.Processes(byEnv)); !slices.Equal(got, []int{env.Process.Pid}) {
		t.Errorf("Processes(by environment) = %v, want [%d]", got, env.Process.Pid)
	}
	if got := pids(testutil.Processes(byArg)); !slices.Equal(got, []int{arg.Process.Pid}) {
		t.Errorf("Processes(by command line) = %v, want [%d]", got, arg.Process.Pid)
	}
	if got := testutil.Cmdline(env.Process.Pid); got != "sleep 600" {
		t.Errorf("Cmdline = %q", got)
	}

	// A survivor fails the check, is named, and is killed.
	rec := &recorder{TB: t}
	start := time.Now()
	testutil.AssertNoProcesses(rec, byEnv)
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("AssertNoProcesses gave up after %v, want about 3 s", took)
	}
	if msg := rec.String(); !strings.Contains(msg, fmt.Sprintf("pid %d", env.Process.Pid)) || !strings.Contains(msg, "sleep 600") {
		t.Errorf("failure message %q does not name the survivor", msg)
	}
	if err := env.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("survivor: Wait = %v, want killed by AssertNoProcesses", err)
	}

	arg.Process.Kill()
	arg.Wait()
	testutil.AssertNoProcesses(t, byArg)
	testutil.VerifyNoLeaks(t)
}

type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

func pids(infos []proc.Info) []int {
	var out []int
	for _, p := range infos {
		out = append(out, p.Pid)
	}
	return out
}

func TestCountFDs(t *testing.T) {
	before := testutil.CountFDs(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.CountFDs(t); got != before+1 {
		t.Errorf("CountFDs with one more file open = %d, want %d", got, before+1)
	}
	f.Close()
	if got := testutil.CountFDs(t); got != before {
		t.Errorf("CountFDs after closing it = %d, want %d", got, before)
	}
}

func TestZombieChildren(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	testutil.WaitFor(t, 5*time.Second, "the exited child to be listed as a zombie", func() bool {
		return slices.Contains(testutil.ZombieChildren(), pid)
	})
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(testutil.ZombieChildren(), pid) {
		t.Errorf("reaped child %d still listed as a zombie", pid)
	}
}

func TestUnprivileged(t *testing.T) {
	if !testutil.AsUnprivileged(t) {
		return
	}
	if uid := os.Geteuid(); uid == 0 {
		t.Fatalf("the test body runs as uid %d", uid)
	}
	if _, err := os.ReadFile("/proc/1/environ"); err == nil {
		t.Error("read init's environment without privilege")
	}
}

// TestFDs: a descriptor left open is named with its target; one that
// another goroutine holds for a moment is not a leak.
func TestFDs(t *testing.T) {
	before := testutil.FDs(t)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.FDs(t)[int(f.Fd())]; got != os.DevNull {
		t.Errorf("FDs[%d] = %q, want %s", f.Fd(), got, os.DevNull)
	}
	rec := &recorder{TB: t}
	testutil.AssertNoNewFDs(rec, before)
	if msg := rec.String(); !strings.Contains(msg, fmt.Sprintf("1 file descriptor(s) left open: %d → %s", f.Fd(), os.DevNull)) {
		t.Errorf("a descriptor left open: %q", msg)
	}
	f.Close()
	testutil.AssertNoNewFDs(t, before)

	// Held for a moment by another goroutine.
	held := make(chan struct{})
	go func() {
		g, err := os.Open(os.DevNull)
		close(held)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			g.Close()
		}
	}()
	<-held
	testutil.AssertNoNewFDs(t, before)
}

// TestProcessesThroughExec: a process is found by its marker while it
// execs (bash -c 'sleep 600' execs sleep). Looks missed it two ways: for
// a moment it shows its new arguments without its environment, and an
// environment read in several reads across the exec came cut short,
// without the marker at its end. A test waiting for such a process to
// be gone saw it gone (mcpserver's TestKeepAliveEndsDeadClient in CI).
func TestProcessesThroughExec(t *testing.T) {
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	missed, looks := 0, 0
	for range 100 {
		cmd := exec.Command("bash", "-c", "sleep 600")
		cmd.Env = testutil.Env(marker)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid := cmd.Process.Pid
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
			found := slices.Contains(pids(testutil.Processes(marker)), pid)
			looks++
			if !found {
				if missed++; missed <= 3 {
					st, err := proc.Stat(pid)
					t.Logf("pid %d unseen; now %q, state %c (%v)", pid, testutil.Cmdline(pid), st.State, err)
				}
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	if missed > 0 {
		t.Errorf("a process that execs went unseen %d times in %d looks", missed, looks)
	}
}
