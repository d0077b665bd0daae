//go:build linux

package remote_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestMain removes the conch binary the tests built (run as `conch
// agent`) and fails the run if goroutines leaked.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const testGrace = 500 * time.Millisecond

// transport is a way to reach an agent: in this process over a pipe, or a
// real `conch agent` child.
type transport struct {
	name string
	// dialer returns a Dialer whose agents carry marker, and a func that
	// breaks every stream it made (a dropped connection).
	dialer func(t *testing.T, marker string) (remote.Dialer, func())
}

var transports = []transport{
	{"pipe", pipeDialer},
	{"process", processDialer},
}

// pipeDialer serves each dial with agent.Serve over a local executor in
// this process.
func pipeDialer(t *testing.T, marker string) (remote.Dialer, func()) {
	return servePipe(t, &local.Options{
		Grace:       testGrace,
		SpillParent: t.TempDir(),
		Environ:     append(os.Environ(), testutil.MarkerEnv+"="+marker),
	})
}

// servePipe serves each dial with agent.Serve over a local executor of
// opts in this process. It returns the Dialer and a func that breaks
// every stream it made.
func servePipe(t *testing.T, opts *local.Options) (remote.Dialer, func()) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		wg.Wait()
	})
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		ex, err := local.New(opts)
		if err != nil {
			return nil, err
		}
		client, server := net.Pipe()
		mu.Lock()
		conns = append(conns, server)
		mu.Unlock()
		hello := agent.Hello{Conch: "test", OS: runtime.GOOS, Arch: runtime.GOARCH, Cwd: ex.Options().Cwd}
		wg.Go(func() {
			if err := agent.Serve(server, server, ex, hello); err != nil && !errors.Is(err, io.ErrClosedPipe) {
				t.Logf("agent.Serve: %v", err)
			}
			server.Close()
		})
		return client, nil
	})
	drop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	return d, drop
}

// processDialer starts `conch agent` for each dial.
func processDialer(t *testing.T, marker string) (remote.Dialer, func()) {
	var (
		mu    sync.Mutex
		procs []*agentProc
	)
	// Built here, not in the dial: a dial's time counts against its
	// timeout, the hello included, and a build on a loaded machine took
	// longer than that.
	bin, err := testutil.BuildConch()
	if err != nil {
		t.Fatal(err)
	}
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		p, err := startAgent(bin)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		procs = append(procs, p)
		mu.Unlock()
		return p, nil
	})
	drop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.Close()
		}
	}
	return d, drop
}

// agentProc is a `conch agent` child and the pipes to it.
type agentProc struct {
	cmd  *exec.Cmd
	in   *os.File // the agent's stdin, our end
	out  *os.File // the agent's stdout, our end
	once sync.Once
	err  error
}

func startAgent(bin string) (*agentProc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(bin, "agent", "--grace-ms", strconv.FormatInt(testGrace.Milliseconds(), 10))
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	return &agentProc{cmd: cmd, in: inW, out: outR}, nil
}

func (p *agentProc) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *agentProc) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close drops the connection as a network would, both ways at once: our
// reading end first (so nothing the agent still sends arrives, as after a
// real drop), then its input (it then kills what it started and exits);
// then it waits for the agent.
func (p *agentProc) Close() error {
	p.once.Do(func() {
		p.out.Close()
		p.in.Close()
		p.err = p.cmd.Wait()
	})
	return p.err
}

// markedExec puts the test's marker in the environment of every command
// it resolves: the agent process itself does not carry it, so that a
// check for leftovers finds only what the commands started.
type markedExec struct {
	*remote.Executor
	marker string
}

func (e markedExec) Resolve(r shell.Request) (shell.Spec, error) {
	env := map[string]string{testutil.MarkerEnv: e.marker}
	for k, v := range r.Env {
		env[k] = v
	}
	r.Env = env
	return e.Executor.Resolve(r)
}

// newExec returns a remote executor of host "h1" over tr; at cleanup it
// closes it and checks that nothing the test started is left.
func newExec(t *testing.T, tr transport, o *remote.Options) (markedExec, string, func()) {
	t.Helper()
	marker := testutil.Marker(t)
	d, drop := tr.dialer(t, marker)
	ex, err := remote.New("h1", d, o)
	if err != nil {
		t.Fatalf("remote.New: %v", err)
	}
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		drop()
		testutil.AssertNoProcesses(t, marker)
	})
	return markedExec{ex, marker}, marker, drop
}

// The provider suite's helpers serve the remote provider's own tests.
var (
	run      = shelltest.MustRun
	runCtx   = shelltest.MustRunContext
	start    = shelltest.MustStart
	code     = shelltest.ExitCode
	waitDone = shelltest.WaitDone
)

// forEach runs f as a subtest over each transport.
func forEach(t *testing.T, f func(t *testing.T, tr transport)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { f(t, tr) })
	}
}

func netPipe() (net.Conn, net.Conn) { return net.Pipe() }
