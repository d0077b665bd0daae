//go:build linux

package remote_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/tools"
)

func TestEchoExitCodesAndStreams(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		r := run(t, ex, shell.Request{Command: "echo hi; echo err >&2; exit 3"})
		if code(r) != 3 || r.Stdout.Text != "hi\n" || r.Stderr.Text != "err\n" || r.Signal != "" {
			t.Errorf("result %+v, want exit 3, hi, err", r)
		}
		if r.Timeout != remote.DefaultTimeout {
			t.Errorf("Timeout %v, want the default %v", r.Timeout, remote.DefaultTimeout)
		}
		r = run(t, ex, shell.Request{Command: "cat; printf %s \"$FOO\"", Stdin: []byte("in-"), Env: map[string]string{"FOO": "bar"}})
		if code(r) != 0 || r.Stdout.Text != "in-bar" {
			t.Errorf("stdin and env: %+v", r)
		}
		r = run(t, ex, shell.Request{Command: "kill -USR1 $$"})
		if r.Signal != "SIGUSR1" || r.ExitCode != nil {
			t.Errorf("self-signal: %+v", r)
		}
	})
}

func TestWorkdirs(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		dir := t.TempDir()
		ex, _, _ := newExec(t, tr, &remote.Options{Cwd: dir})
		if r := run(t, ex, shell.Request{Command: "pwd"}); r.Stdout.Text != dir+"\n" {
			t.Errorf("pwd %q, want %q", r.Stdout.Text, dir)
		}
		spec, _ := ex.Resolve(shell.Request{Command: "true", Workdir: "missing"})
		_, err := shell.Run(context.Background(), ex, spec)
		var we *shell.WorkdirError
		if !errors.As(err, &we) || !errors.Is(err, fs.ErrNotExist) || we.Path != dir+"/missing" {
			t.Errorf("missing workdir: %v, want a *shell.WorkdirError for %s/missing wrapping ENOENT", err, dir)
		}
		if _, err := ex.Start(spec); !errors.As(err, &we) {
			t.Errorf("Start in a missing workdir: %v", err)
		}
		// ~ is the home of the host's user, whatever the configured cwd.
		home, _ := os.UserHomeDir()
		if r := run(t, ex, shell.Request{Command: "pwd", Workdir: "~"}); r.Stdout.Text != home+"\n" {
			t.Errorf("pwd in ~: %q, want %q", r.Stdout.Text, home)
		}
	})
}

// Without a configured Cwd, a command runs in the agent's directory.
func TestDefaultCwdIsTheAgents(t *testing.T) {
	ex, _, _ := newExec(t, transports[1], nil)
	h, err := ex.Hello(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, ex, shell.Request{Command: "pwd -P"}); r.Stdout.Text != h.Cwd+"\n" || h.Cwd == "" {
		t.Errorf("pwd %q, want the agent's cwd %q", r.Stdout.Text, h.Cwd)
	}
}

func TestTimeoutAndCancelKillTheTree(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, marker, _ := newExec(t, tr, nil)
		r := run(t, ex, shell.Request{Command: "sleep 30 & sleep 30", Timeout: 200 * time.Millisecond})
		if !r.TimedOut || r.Signal != "SIGTERM" || r.Timeout != 200*time.Millisecond {
			t.Errorf("timeout: %+v", r)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		r = runCtx(t, ctx, ex, shell.Request{Command: "sleep 30"})
		if !r.Aborted || r.TimedOut || r.Signal != "SIGTERM" {
			t.Errorf("cancel: %+v", r)
		}
		testutil.AssertNoProcesses(t, marker)
		_, err := shell.Run(ctx, ex, shell.Spec{Command: "true"})
		if !errors.Is(err, shell.ErrAbortedBeforeSpawn) {
			t.Errorf("Run with a done ctx: %v", err)
		}
	})
}

func TestBackgroundReadsAndKill(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		p := start(t, ex, shell.Request{Command: "echo one; sleep 0.3; echo two >&2; sleep 30"})
		deadline := time.Now().Add(10 * time.Second)
		var got strings.Builder
		for !strings.Contains(got.String(), "two") && time.Now().Before(deadline) {
			r := p.Read()
			got.WriteString(tools.JoinStreams(r.Stdout, r.Stderr))
			time.Sleep(20 * time.Millisecond)
		}
		if got.String() != "one\n[stderr]\ntwo\n" {
			t.Errorf("reads %q", got.String())
		}
		if peek := p.Peek(100); !peek.Empty() {
			t.Errorf("peek after reading all: %+v", peek)
		}
		if out, errb := p.Written(); out != 4 || errb != 4 {
			t.Errorf("Written %d, %d, want 4, 4", out, errb)
		}
		if p.Status() != shell.StatusRunning {
			t.Errorf("status %s while running", p.Status())
		}
		if !p.Kill() {
			t.Error("first Kill returned false")
		}
		waitDone(t, p, 10*time.Second)
		if p.Kill() {
			t.Error("Kill after settling returned true")
		}
		if p.Status() != shell.StatusKilled || p.Signal() != "SIGTERM" || p.ExitCode() != nil {
			t.Errorf("after kill: %s %q %v", p.Status(), p.Signal(), p.ExitCode())
		}
		if r := p.Read(); !r.Empty() {
			t.Errorf("read after everything was read: %+v", r)
		}
		q := start(t, ex, shell.Request{Command: "exit 4"})
		waitDone(t, q, 10*time.Second)
		if q.Status() != shell.StatusCompleted || *q.ExitCode() != 4 {
			t.Errorf("background exit: %s %v", q.Status(), q.ExitCode())
		}
	})
}

// A long stream keeps its tail, its spill file is named as <host>:<path>,
// and the file on the host holds the whole stream.
func TestLongOutputSpillsOnTheHost(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		r := run(t, ex, shell.Request{Command: "seq 1 100000"})
		o := r.Stdout
		if !o.Truncated || o.Host != "h1" || !strings.HasPrefix(o.SpillPath, "/") || !strings.HasSuffix(o.Text, "\n100000\n") {
			t.Fatalf("stdout: truncated %v spill %q tail %q", o.Truncated, o.SpillPath, o.Text[max(0, len(o.Text)-20):])
		}
		local := o.SpillPath
		if c := run(t, ex, shell.Request{Command: "wc -c < " + local}); c.Stdout.Text != "588895\n" {
			t.Errorf("spill file holds %q bytes", c.Stdout.Text)
		}
		p := start(t, ex, shell.Request{Command: "seq 1 100000"})
		waitDone(t, p, 10*time.Second)
		rr := p.Read()
		if !rr.Lossy || rr.Host != "h1" || !strings.HasPrefix(rr.StdoutSpill, "/") {
			t.Errorf("lossy read: lossy %v spill %q skipped %+v", rr.Lossy, rr.StdoutSpill, rr.StdoutSkipped)
		}
	})
}

// A connection lost while a command runs: the call ends with the lost
// marker, the agent stops the command, and the next call reconnects.
func TestLostConnectionStopsTheCommand(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, marker, drop := newExec(t, tr, nil)
		bg := start(t, ex, shell.Request{Command: "echo started; sleep 31"})
		done := make(chan shell.Result, 1)
		go func() { done <- run(t, ex, shell.Request{Command: "sleep 30"}) }()
		// Both run on the host before the connection drops: each one's
		// own sleep is seen (the task alone is two processes already).
		running := func(cmd string) bool {
			for _, p := range testutil.Processes(marker) {
				if testutil.Cmdline(p.Pid) == cmd {
					return true
				}
			}
			return false
		}
		testutil.WaitFor(t, 10*time.Second, "both sleeps on the host", func() bool { return running("sleep 30") && running("sleep 31") })
		drop()
		r := lostResult(t, done)
		want := "[connection to host h1 lost; the command was stopped]\n"
		if r.Stderr.Text != want || r.ExitCode != nil {
			t.Errorf("lost Run: %+v, want stderr %q", r, want)
		}
		waitDone(t, bg, 10*time.Second)
		if bg.Status() != shell.StatusKilled || bg.Kill() {
			t.Errorf("lost task: status %s", bg.Status())
		}
		if rr := bg.Read(); rr.Stderr != want {
			t.Errorf("lost task's read %+v, want the marker", rr)
		}
		if rr := bg.Read(); !rr.Empty() {
			t.Errorf("second read %+v, want nothing (the marker comes once)", rr)
		}
		testutil.AssertNoProcesses(t, marker)
		if r := run(t, ex, shell.Request{Command: "echo back"}); r.Stdout.Text != "back\n" {
			t.Errorf("after reconnect: %+v", r)
		}
	})
}

// A foreground call cut by a lost connection keeps the output the agent
// sent before the cut, then the lost marker; the agent sends a foreground
// command's output while it runs (docs/remote.md).
func TestLostConnectionKeepsOutput(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, drop := newExec(t, tr, nil)
		printed := filepath.Join(t.TempDir(), "printed")
		done := make(chan shell.Result, 1)
		go func() {
			done <- run(t, ex, shell.Request{Command: "echo before; echo oops >&2; touch " + printed + "; sleep 30"})
		}()
		testutil.WaitFor(t, 10*time.Second, "the output printed on the host", func() bool {
			_, err := os.Stat(printed)
			return err == nil
		})
		time.Sleep(2 * time.Second) // the agent sends it within 200 ms
		drop()
		r := lostResult(t, done)
		want := "oops\n[connection to host h1 lost; the command was stopped]\n"
		if r.Stdout.Text != "before\n" || r.Stderr.Text != want || r.ExitCode != nil || r.Stdout.Truncated {
			t.Errorf("lost Run: %+v, want stdout %q, stderr %q", r, "before\n", want)
		}
	})
}

// lostResult waits for the result of a Run whose connection was lost.
func lostResult(t *testing.T, done <-chan shell.Result) shell.Result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running 10 s after its connection was lost")
		return shell.Result{}
	}
}

// The agent kills what it started when its input ends, and Close waits
// for the end of what runs.
func TestCloseKillsEverything(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, marker, _ := newExec(t, tr, nil)
		p := start(t, ex, shell.Request{Command: "trap '' TERM; sleep 30 & setsid sleep 30 & wait"})
		deadline := time.Now().Add(10 * time.Second)
		for len(testutil.Commands(marker)) < 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if err := ex.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.AssertNoProcesses(t, marker)
		waitDone(t, p, 10*time.Second)
		if _, err := ex.Start(shell.Spec{Command: "true"}); !errors.Is(err, shell.ErrClosed) {
			t.Errorf("Start after Close: %v", err)
		}
	})
}

// A stdin too large for one frame fails that call alone.
func TestHugeStdinFailsAlone(t *testing.T) {
	ex, _, _ := newExec(t, transports[0], nil)
	spec, _ := ex.Resolve(shell.Request{Command: "wc -c", Stdin: make([]byte, agent.MaxFrame)})
	if _, err := shell.Run(context.Background(), ex, spec); !errors.Is(err, agent.ErrFrameTooLarge) {
		t.Errorf("Run with a %d-byte stdin: %v", agent.MaxFrame, err)
	}
	if r := run(t, ex, shell.Request{Command: "wc -c", Stdin: make([]byte, 1<<20)}); r.Stdout.Text != "1048576\n" {
		t.Errorf("then a 1 MiB stdin: %+v", r)
	}
}

func TestUnreachableHost(t *testing.T) {
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	})
	ex, err := remote.New("gpu1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	spec, _ := ex.Resolve(shell.Request{Command: "true"})
	_, err = shell.Run(context.Background(), ex, spec)
	want := "host gpu1 unreachable: dial tcp 127.0.0.1:1: connect: connection refused; the command did not run"
	var ue *remote.UnreachableError
	if !errors.As(err, &ue) || err.Error() != want {
		t.Errorf("Run: %v, want %q", err, want)
	}
}

// A stream that never says hello (a login banner, a hung agent) fails the
// dial at its timeout.
func TestSilentAgentTimesOut(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		c, s := netPipe()
		wg.Go(func() { io.Copy(io.Discard, s); s.Close() })
		return c, nil
	})
	ex, _ := remote.New("h", d, &remote.Options{DialTimeout: 200 * time.Millisecond})
	defer ex.Close()
	_, err := ex.Start(shell.Spec{Command: "true"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start: %v, want a deadline", err)
	}
}

// A ctx that ends while the host is being dialled aborts before the spawn.
func TestCancelDuringDial(t *testing.T) {
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	ex, _ := remote.New("h", d, nil)
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := shell.Run(ctx, ex, shell.Spec{Command: "true"}); !errors.Is(err, shell.ErrAbortedBeforeSpawn) {
		t.Errorf("Run: %v, want aborted before spawn", err)
	}
}

// A dial that fails at ctx's deadline aborts before the spawn, even when
// ctx's own timer has not yet marked it done: the network poller's
// deadline can fire first (an i/o timeout), and on a loaded machine
// sshhost's TestCancelDuringFirstDial once read it as a host unreachable.
func TestDialFailedAtTheDeadline(t *testing.T) {
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	})
	ex, _ := remote.New("h", d, nil)
	defer ex.Close()
	_, err := shell.Run(deadlinePassed{context.Background()}, ex, shell.Spec{Command: "true"})
	if !errors.Is(err, shell.ErrAbortedBeforeSpawn) || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Errorf("Run: %v, want aborted before spawn by the deadline", err)
	}
}

// deadlinePassed is a context whose deadline has passed but that is not
// yet done: what a dial sees between the two timers.
type deadlinePassed struct{ context.Context }

func (deadlinePassed) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestResolve(t *testing.T) {
	ex, _ := remote.New("h", nil, &remote.Options{Cwd: "/srv/app", MaxTimeout: time.Second})
	s, err := ex.Resolve(shell.Request{Command: "x", Workdir: "sub/../b", Timeout: time.Hour})
	if err != nil || s.Workdir != "/srv/app/b" || s.Timeout != time.Second {
		t.Errorf("Resolve: %+v %v", s, err)
	}
	for _, r := range []shell.Request{{Command: " \n"}, {Command: "x", Timeout: -1}, {Command: "x", StdoutMaxBytes: -1}} {
		var re *shell.RequestError
		if _, err := ex.Resolve(r); !errors.As(err, &re) {
			t.Errorf("Resolve(%+v): %v, want a RequestError", r, err)
		}
	}
	if _, err := remote.New("h", nil, &remote.Options{Cwd: "rel"}); err == nil {
		t.Error("relative Cwd accepted")
	}
}

// EndOwner reaches the host: what an owner's foreground commands left
// running there (setsid escapees included) and its running tasks are
// killed before it returns; another owner's are not.
func TestEndOwnerOnTheHost(t *testing.T) {
	var _ shell.OwnerEnder = (*remote.Executor)(nil)
	forEach(t, func(t *testing.T, tr transport) {
		ex, marker, _ := newExec(t, tr, nil)
		quiet := " >/dev/null 2>&1"
		run(t, ex, shell.Request{Owner: "a", Command: "setsid sleep 1010" + quiet + " & sleep 1011" + quiet + " &"})
		// Commands of two owners that overlap make an escapee's owner
		// unknowable from its start time; these do not.
		time.Sleep(50 * time.Millisecond)
		run(t, ex, shell.Request{Owner: "b", Command: "setsid sleep 1020" + quiet + " & sleep 1021" + quiet + " &"})
		bg := start(t, ex, shell.Request{Owner: "b", Command: "sleep 1022"})
		waitSleeps(t, marker, "1010", "1011", "1020", "1021", "1022")

		ex.EndOwner("b")
		for _, a := range []string{"1020", "1021", "1022"} {
			if n := len(sleeps(marker, a)); n != 0 {
				t.Errorf("sleep %s of b survived EndOwner(b)", a)
			}
		}
		for _, a := range []string{"1010", "1011"} {
			if n := len(sleeps(marker, a)); n != 1 {
				t.Errorf("sleep %s of a: %d alive after EndOwner(b), want 1", a, n)
			}
		}
		select {
		case <-bg.Done():
			if bg.Status() != shell.StatusKilled {
				t.Errorf("b's running task: status %s, want killed", bg.Status())
			}
		default:
			t.Error("b's running task had not settled when EndOwner(b) returned")
		}
		ex.EndOwner("a")
		for _, a := range []string{"1010", "1011"} {
			if n := len(sleeps(marker, a)); n != 0 {
				t.Errorf("sleep %s of a survived EndOwner(a)", a)
			}
		}
	})
}

// EndOwner of an executor that never connected does not connect: a fresh
// agent runs nothing of anyone's.
func TestEndOwnerDoesNotDial(t *testing.T) {
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		t.Error("EndOwner dialled")
		return nil, errors.New("no dial")
	})
	ex, err := remote.New("h1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ex.EndOwner("a")
}

// sleeps are the processes carrying marker whose command line is
// `sleep arg`.
func sleeps(marker, arg string) []int {
	var out []int
	for _, p := range testutil.Processes(marker) {
		if testutil.Cmdline(p.Pid) == "sleep "+arg {
			out = append(out, p.Pid)
		}
	}
	return out
}

func waitSleeps(t *testing.T, marker string, args ...string) {
	t.Helper()
	for _, a := range args {
		testutil.WaitFor(t, 5*time.Second, "sleep "+a+" to start", func() bool { return len(sleeps(marker, a)) > 0 })
	}
}

// ownerless hides its executor's EndOwner, as an agent built before
// end-owner existed does.
type ownerless struct{ shell.Executor }

// EndOwner against an agent that cannot end an owner returns at once and
// leaves the owner's commands to the connection's end.
func TestEndOwnerOldAgent(t *testing.T) {
	marker := testutil.Marker(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		ex, err := local.New(&local.Options{Grace: testGrace, SpillParent: t.TempDir()})
		if err != nil {
			return nil, err
		}
		client, server := netPipe()
		wg.Go(func() {
			agent.Serve(server, server, ownerless{ex}, agent.Hello{})
			server.Close()
		})
		return client, nil
	})
	rex, err := remote.New("h1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := markedExec{rex, marker}
	p := start(t, ex, shell.Request{Owner: "a", Command: "sleep 1050"})
	waitSleeps(t, marker, "1050")
	ended := make(chan struct{})
	go func() { rex.EndOwner("a"); close(ended) }()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("EndOwner hung on an agent that cannot end an owner")
	}
	if n := len(sleeps(marker, "1050")); n != 1 {
		t.Errorf("sleep 1050: %d alive, want 1 (left to the connection's end)", n)
	}
	if err := rex.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	waitDone(t, p, 5*time.Second)
	testutil.AssertNoProcesses(t, marker)
}
