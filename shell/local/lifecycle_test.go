//go:build linux

package local_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// A timeout that fires while the pipes drain after a NORMAL exit must not
// turn the exit into a timeout, nor kill the members left running.
func TestTimeoutDuringDrainKeepsNormalExit(t *testing.T) {
	ex, marker := newExec(t, &local.Options{Grace: 1500 * time.Millisecond})
	r := run(t, ex, shell.Request{Command: "sleep 30 & echo ok", Timeout: 300 * time.Millisecond})
	if r.TimedOut || r.Aborted || code(r) != 0 || r.Signal != "" || r.Stdout.Text != "ok\n" {
		t.Errorf("result %+v, want a normal exit 0", r)
	}
	if n := len(testutil.Processes(marker)); n != 1 {
		t.Errorf("%d processes left running after a normal exit, want the sleep", n)
	}
}

// Close racing Start and Run: no panic, no hang, nothing left running, and
// ErrClosed once Close has begun.
func TestCloseRacingSpawns(t *testing.T) {
	for round := range 20 {
		ex, marker := newExec(t, nil)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					spec, _ := ex.Resolve(shell.Request{Command: "sleep 30"})
					p, err := ex.Start(spec)
					if errors.Is(err, shell.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Start: %v", err)
						return
					}
					go p.Kill() // Kill racing Close
				}
			})
			wg.Go(func() {
				for {
					spec, _ := ex.Resolve(shell.Request{Command: "sleep 30", Timeout: time.Minute})
					p, err := ex.Launch(spec)
					if errors.Is(err, shell.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Launch: %v", err)
						return
					}
					_ = p
				}
			})
			wg.Go(func() {
				for {
					spec, _ := ex.Resolve(shell.Request{Command: "sleep 30", Timeout: time.Minute})
					_, err := shell.Run(context.Background(), ex, spec)
					if errors.Is(err, shell.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Run: %v", err)
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(round%5) * 3 * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- ex.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close hung", round)
		}
		assertGone(t, marker)
		wg.Wait()
		spec, _ := ex.Resolve(shell.Request{Command: "true"})
		if _, err := ex.Start(spec); !errors.Is(err, shell.ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
	}
}

// Every Close, not only the first, returns once everything is gone.
func TestConcurrentCloseWaitsForTheFirst(t *testing.T) {
	ex, marker := newExec(t, &local.Options{Grace: 800 * time.Millisecond})
	p := start(t, ex, shell.Request{Command: "trap '' TERM; echo ready; setsid sleep 30 & sleep 30"})
	readUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "ready\n" })
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := ex.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if ps := testutil.Processes(marker); len(ps) > 0 {
				t.Errorf("a Close returned with %d processes alive", len(ps))
			}
		})
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
}

func TestKillFromManyGoroutines(t *testing.T) {
	ex, _ := newExec(t, nil)
	for range 5 {
		p := start(t, ex, shell.Request{Command: "sleep 30"})
		var trues atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if p.Kill() {
					trues.Add(1)
				}
			})
		}
		wg.Wait()
		waitDone(t, p, 5*time.Second)
		if n := trues.Load(); n != 1 {
			t.Errorf("%d Kills returned true, want 1", n)
		}
		if p.Status() != shell.StatusKilled || p.Kill() {
			t.Errorf("status %v", p.Status())
		}
	}
}

// A command that closes its stdout early but keeps running is still
// running: it is waited for, timed out and killed like any other.
func TestClosedStdoutKeepsRunning(t *testing.T) {
	ex, _ := newExec(t, nil)
	t0 := time.Now()
	r := run(t, ex, shell.Request{Command: "echo before; exec >&-; sleep 1; echo after >&2"})
	if d := time.Since(t0); d < time.Second || r.Stdout.Text != "before\n" || r.Stderr.Text != "after\n" || code(r) != 0 {
		t.Errorf("after %v: %+v", d, r)
	}
	r = run(t, ex, shell.Request{Command: "exec >&- 2>&-; sleep 30", Timeout: 200 * time.Millisecond})
	if !r.TimedOut || r.Signal != "SIGTERM" {
		t.Errorf("timeout with closed pipes: %+v", r)
	}
	p := start(t, ex, shell.Request{Command: "exec >&- 2>&-; sleep 30"})
	time.Sleep(100 * time.Millisecond)
	if p.Status() != shell.StatusRunning || !p.Kill() {
		t.Fatalf("status %v", p.Status())
	}
	waitDone(t, p, 5*time.Second)
	if p.Status() != shell.StatusKilled {
		t.Errorf("status %v", p.Status())
	}
}

// A background command that writes much faster than anyone reads, for a
// long time, costs bounded memory and spill space.
func TestFastBackgroundWriterIsBounded(t *testing.T) {
	spill := t.TempDir()
	ex, _ := newExec(t, &local.Options{MaxSpillBytes: 8 << 20, SpillParent: spill})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	p := start(t, ex, shell.Request{Command: "cat /dev/zero"})
	deadline := time.Now().Add(2 * time.Second)
	var peak uint64
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
	}
	out, _ := p.Written()
	r := p.Read()
	if !r.Lossy || r.StdoutSpill != "" || len(r.Stdout) != local.DefaultMaxOutputBytes {
		t.Errorf("read after %d bytes: lossy %v spill %q len %d", out, r.Lossy, r.StdoutSpill, len(r.Stdout))
	}
	p.Kill()
	waitDone(t, p, 5*time.Second)
	t.Logf("%d MB written; heap peak grew by %d KB", out>>20, (int64(peak)-int64(before.HeapInuse))>>10)
	if grow := int64(peak) - int64(before.HeapInuse); grow > 16<<20 {
		t.Errorf("heap grew by %d bytes", grow)
	}
	if files := shelltest.SpillFiles(spill); len(files) != 0 {
		t.Errorf("spill files left: %v", files)
	}
}

// Stdin that nobody reads, held open by a process that outlives the kill,
// leaves no goroutine blocked on the pipe once the process settles.
func TestUnreadStdinLeavesNoGoroutine(t *testing.T) {
	ex, _ := newExec(t, &local.Options{Grace: 300 * time.Millisecond})
	run(t, ex, shell.Request{Command: "true", Stdin: []byte("warm")})
	base := runtime.NumGoroutine()
	big := make([]byte, 1<<20)
	for _, cmd := range []string{
		"sleep 30",
		"setsid sleep 30 <&0 >/dev/null 2>&1 & sleep 30",
		"sleep 30 <&0 >/dev/null 2>&1 & sleep 30",
	} {
		p := start(t, ex, shell.Request{Command: cmd, Stdin: big})
		time.Sleep(100 * time.Millisecond)
		t0 := time.Now()
		p.Kill()
		waitDone(t, p, 5*time.Second)
		t.Logf("%q settled %v after Kill", cmd, time.Since(t0))
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<16)
			t.Errorf("%q: %d goroutines, %d before:\n%s", cmd, n, base, buf[:runtime.Stack(buf, true)])
		}
	}
}

func TestSymlinkAndDotDotWorkdirs(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	os.MkdirAll(filepath.Join(real, "a", "b"), 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ex, _ := newExec(t, &local.Options{Cwd: filepath.Join(base, "real", "a")})
	r := run(t, ex, shell.Request{Command: "pwd; pwd -P; echo $PWD", Workdir: link})
	if want := link + "\n" + real + "\n" + link + "\n"; r.Stdout.Text != want {
		t.Errorf("symlink workdir: %q, want %q", r.Stdout.Text, want)
	}
	s, err := ex.Resolve(shell.Request{Command: "pwd", Workdir: "b/../../a/./b/.."})
	if err != nil || s.Workdir != filepath.Join(real, "a") {
		t.Errorf("Resolve relative ..: %q %v", s.Workdir, err)
	}
	if r := run(t, ex, shell.Request{Command: "pwd -P", Workdir: ".."}); r.Stdout.Text != real+"\n" {
		t.Errorf("workdir ..: %q", r.Stdout.Text)
	}
}

// Two executors in one process: closing one leaves the other's commands,
// and what they left running, alone. B's escapee (it left its session
// with setsid and was re-parented to this process when its shell exited)
// is B's by its start time, which fell while only B's command ran; A's
// Close attributes it in its own scan, before it kills.
//
// What remains of the README's "Several executors in one process": an
// escapee that started while commands of both executors ran is nobody's,
// and either Close kills it.
func TestTwoExecutorsCloseIndependently(t *testing.T) {
	a, _ := newExec(t, nil)
	b, markerB := newExec(t, nil)
	for _, cmd := range []string{
		"sleep 1000 & echo member",
		"setsid sleep 1001 & echo escapee",
		"( ( sleep 1002 & ) & ); echo doublefork",
	} {
		if r := run(t, b, shell.Request{Command: cmd}); code(r) != 0 {
			t.Fatalf("%q: %+v", cmd, r)
		}
	}
	p := start(t, b, shell.Request{Command: "sleep 1003"})
	run(t, a, shell.Request{Command: "setsid sleep 1 & true"})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(testutil.Processes(markerB)); n != 4 {
		for _, p := range testutil.Processes(markerB) {
			t.Logf("left: %s", testutil.Cmdline(p.Pid))
		}
		t.Errorf("closing A left %d of B's 4 processes", n)
	}
	if p.Status() != shell.StatusRunning {
		t.Errorf("B's process: %v", p.Status())
	}
}

// A Launched command keeps its timeout after the caller started reading it
// (a yielded foreground call), and settles killed with TimedOut.
func TestLaunchTimeoutAfterRead(t *testing.T) {
	ex, _ := newExec(t, nil)
	spec, _ := ex.Resolve(shell.Request{Command: "echo first; sleep 30", Timeout: 400 * time.Millisecond})
	p, err := ex.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "first\n" })
	waitDone(t, p, 5*time.Second)
	res := p.Result()
	if !res.TimedOut || res.Aborted || res.Signal != "SIGTERM" || res.Timeout != 400*time.Millisecond || res.Stdout.Text != "first\n" {
		t.Errorf("result %+v", res)
	}
	if p.Status() != shell.StatusKilled || p.Signal() != "SIGTERM" || p.Kill() {
		t.Errorf("status %v", p.Status())
	}
	if r := p.Read(); !r.Empty() {
		t.Errorf("read after done: %+v", r)
	}
	// Killed by the caller before its timeout: Aborted, not TimedOut.
	spec, _ = ex.Resolve(shell.Request{Command: "sleep 30", Timeout: 300 * time.Millisecond})
	p, _ = ex.Launch(spec)
	if !p.Kill() {
		t.Fatal("Kill false")
	}
	waitDone(t, p, 5*time.Second)
	time.Sleep(400 * time.Millisecond)
	if res := p.Result(); res.TimedOut || !res.Aborted {
		t.Errorf("killed before the timeout: %+v", res)
	}
}

// A number too large to honour is refused up front, never a panic later.
func TestHugeByteCapsAreRefused(t *testing.T) {
	ex, _ := newExec(t, nil)
	if s, err := ex.Resolve(shell.Request{Command: "echo ok", StdoutMaxBytes: math.MaxInt}); err == nil {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("Run with StdoutMaxBytes=MaxInt panicked: %v", v)
				}
			}()
			shell.Run(context.Background(), ex, s)
		}()
	} else if !errors.As(err, new(*shell.RequestError)) {
		t.Errorf("Resolve: %v", err)
	}
	_, err := local.New(&local.Options{MaxOutputBytes: math.MaxInt})
	if err == nil || !strings.HasPrefix(err.Error(), "MaxOutputBytes ") {
		t.Errorf("New(MaxOutputBytes: MaxInt) = %v, want an error naming the field", err)
	}
}

// The shell's pid is its process group id. As long as a kill may still be
// sent to the group (until the process settles), that pid must stay held
// (by the shell or its zombie): once it is reaped, the number may name a
// new, unrelated group, and a Kill would signal a stranger. Here a
// grandchild that left the session holds the pipes, so the command stays
// unsettled for the whole grace after its shell exits.
func TestPgidHeldUntilSettled(t *testing.T) {
	ex, marker := newExec(t, &local.Options{Grace: 1500 * time.Millisecond})
	p := start(t, ex, shell.Request{Command: "setsid sleep 30 & echo $$"})
	r := readUntil(t, p, func(r shell.ReadResult) bool { return strings.HasSuffix(r.Stdout, "\n") })
	echoed := time.Now() // the shell exits after its echo, so not before this less the reader's delay
	pgid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case <-p.Done():
			return
		default:
		}
		if _, err := proc.Stat(pgid); errors.Is(err, proc.ErrNotExist) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The reap is the last step of settling: Done closes right after it
	// (a look between the two sees the pid gone and Done still open).
	// Reaped early means reaped well before the grace after the exit.
	gone := time.Since(echoed)
	select {
	case <-p.Done():
		if gone >= time.Second { // the grace (1.5 s) less the reader's delay
			return
		}
	case <-time.After(10 * time.Second):
	}
	t.Errorf("the shell (pid and pgid %d) was reaped %v after its echo, while the process was still %v", pgid, gone, p.Status())
	// Show what that costs: hand the freed number to a new group (root
	// can pick the next pid), then Kill the old process.
	if os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pgid-1)), 0) != nil {
		return
	}
	victim := exec.Command("sleep", "30")
	victim.Env = append(os.Environ(), testutil.MarkerEnv+"="+marker)
	victim.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := proc.StartCmd(victim); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); proc.WaitCmd(victim) }()
	if victim.Process.Pid != pgid {
		t.Logf("could not reuse pid %d (got %d)", pgid, victim.Process.Pid)
		return
	}
	p.Kill()
	time.Sleep(200 * time.Millisecond)
	if s, err := proc.Stat(pgid); err != nil || !s.Alive() {
		t.Errorf("Kill of a settled-to-be process signalled an unrelated group that reused pgid %d", pgid)
	}
}

// Refused spawns (a closed executor, bash that cannot start, a missing
// workdir) leave no file descriptor behind.
func TestRefusedSpawnsLeakNoFD(t *testing.T) {
	bad, _ := newExec(t, &local.Options{Shell: "/nonexistent/bash"})
	ex, _ := newExec(t, nil)
	closed, _ := newExec(t, nil)
	closed.Close()
	spec, _ := bad.Resolve(shell.Request{Command: "true", Stdin: []byte("x")})
	missing, _ := ex.Resolve(shell.Request{Command: "true", Workdir: filepath.Join(t.TempDir(), "missing"), Stdin: []byte("x")})
	fds := testutil.FDs(t)
	for range 50 {
		if _, err := bad.Start(spec); err == nil {
			t.Fatal("Start with no bash succeeded")
		}
		if _, err := closed.Start(spec); !errors.Is(err, shell.ErrClosed) {
			t.Fatalf("Start after Close: %v", err)
		}
		if _, err := shell.Run(context.Background(), ex, missing); err == nil {
			t.Fatal("Run in a missing workdir succeeded")
		}
	}
	testutil.AssertNoNewFDs(t, fds)
}
