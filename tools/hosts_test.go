//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
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

// pipeHost is a remote host served by an agent in this process over a
// pipe, its commands carrying marker and running in cwd by default. drop
// cuts its connections.
func pipeHost(t *testing.T, name, marker, cwd string) (tools.Host, func()) {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		ex, err := local.New(&local.Options{Grace: time.Second, SpillParent: t.TempDir(),
			Environ: append(os.Environ(), testutil.MarkerEnv+"="+marker)})
		if err != nil {
			return nil, err
		}
		c, s := net.Pipe()
		mu.Lock()
		conns = append(conns, s)
		mu.Unlock()
		wg.Go(func() {
			agent.Serve(s, s, ex, agent.Hello{OS: runtime.GOOS, Arch: runtime.GOARCH})
			s.Close()
		})
		return c, nil
	})
	ex, err := remote.New(name, d, &remote.Options{Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	drop := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(func() {
		ex.Close()
		wg.Wait()
	})
	return tools.Host{Name: name, Executor: ex}, drop
}

func hostEnv(t *testing.T) (*env, string, func()) {
	marker := testutil.Marker(t)
	hostDir := realDir(t)
	gpu, drop := pipeHost(t, "gpu1", marker, hostDir)
	build, _ := pipeHost(t, "build", marker, "/")
	e := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{gpu, build}}})
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	return e, hostDir, drop
}

func TestHostParameter(t *testing.T) {
	e, hostDir, _ := hostEnv(t)
	var schema struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(e.ts.Tools()[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties["host"].Enum; strings.Join(got, ",") != "local,gpu1,build" {
		t.Errorf("host enum %q", got)
	}
	// Without hosts there is no host parameter, and a model's host is an
	// unknown key.
	plain := newEnv(t, envOpts{})
	if strings.Contains(string(plain.ts.Tools()[0].InputSchema), `"host"`) {
		t.Error("host offered without configured hosts")
	}
	if r := plain.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "host": "gpu1"}); !r.IsError {
		t.Errorf("host accepted without hosts: %q", r.Text)
	}

	r := e.call(tools.NameBash, map[string]any{"command": "pwd", "description": "Show the directory", "host": "gpu1"})
	if r.IsError || r.Text != hostDir+"\n" {
		t.Errorf("on gpu1: %q, want the host's cwd %s (not the session's %s)", r.Text, hostDir, e.dir)
	}
	r = e.call(tools.NameBash, map[string]any{"command": "pwd", "description": "Show the directory", "host": "local"})
	if r.Text != e.dir+"\n" {
		t.Errorf("on local: %q, want the session's cwd", r.Text)
	}
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "host": "gpu2"}),
		`unknown host "gpu2"; configured hosts: gpu1, build`)
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "host": 3}),
		"invalid host: expected a string")
	// A null host is not given; an unknown key is refused naming host
	// among the parameters.
	if r := e.call(tools.NameBash, map[string]any{"command": "pwd", "description": "d", "host": nil}); r.Text != e.dir+"\n" {
		t.Errorf("null host: %q, want the local session's cwd", r.Text)
	}
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "hots": "gpu1"}),
		`invalid arguments: unknown parameter "hots" (did you mean "host"?)`)
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "zzzzzz": 1}),
		`invalid arguments: unknown parameter "zzzzzz"; bash takes command, description, timeoutMs, workdir, run_in_background, tty, host`)
	// The remote provider runs terminals on its host; a host whose
	// provider offers none refuses a tty call, and nothing runs.
	if r := e.call(tools.NameBash, map[string]any{"command": "test -t 0 && echo on-a-terminal", "description": "d", "host": "gpu1", "tty": true}); r.IsError || !strings.Contains(r.Text, "on-a-terminal") {
		t.Errorf("tty on gpu1: %q, want the command on a terminal there", r.Text)
	}
	h, _ := pipeHost(t, "bare", testutil.Marker(t), hostDir)
	bare := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{{Name: "bare", Executor: noTerminals{h.Executor}}}}})
	wantError(t, bare.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "host": "bare", "tty": true}),
		"tty is not available on host bare")
	// The other arguments' errors come first.
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "", "description": "d", "host": "gpu2"}),
		"invalid command: expected a non-empty string")

	// Remote output spills on the host; its path is shown as host:path.
	r = e.call(tools.NameBash, map[string]any{"command": "seq 1 200000", "description": "Print many lines", "host": "gpu1"})
	if !strings.Contains(r.Text, "full output: gpu1:/") {
		t.Errorf("long remote output does not name gpu1:<path>: %q", r.Text[len(r.Text)-300:])
	}
}

func TestRemoteTasks(t *testing.T) {
	e, _, drop := hostEnv(t)
	r := e.call(tools.NameBash, map[string]any{"command": "echo hi; sleep 30", "description": "Start a task", "host": "gpu1", "run_in_background": true})
	if r.IsError {
		t.Fatal(r.Text)
	}
	id := r.Value.(tools.BackgroundValue).TaskID
	if !strings.HasPrefix(id, "bash@gpu1-") {
		t.Errorf("task id %q, want kind bash@gpu1", id)
	}
	e.readUntil(e.sess, id, "hi")
	list := e.call(tools.NameTaskList, map[string]any{}).Text
	if !strings.Contains(list, "["+"bash@gpu1] running") {
		t.Errorf("task_list: %q", list)
	}
	drop()
	info := e.settle(e.sess, id)
	out := e.call(tools.NameTaskOutput, map[string]any{"task_id": id}).Text
	if !strings.Contains(out, "[connection to host gpu1 lost; the command was stopped]") || info.Status != "killed" {
		t.Errorf("task cut by a lost connection: %s, %q", info.Status, out)
	}
}

// An unreachable host is a tool error that says the command did not run.
func TestUnreachableHostIsAnError(t *testing.T) {
	d := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		return nil, errors.New("dial tcp 10.0.0.9:22: connect: no route to host")
	})
	ex, _ := remote.New("db", d, nil)
	defer ex.Close()
	e := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{{Name: "db", Executor: ex}}}})
	wantError(t, e.call(tools.NameBash, map[string]any{"command": "true", "description": "d", "host": "db"}),
		"host db unreachable: dial tcp 10.0.0.9:22: connect: no route to host; the command did not run")
}

// TestHostCwds checks the configured cwds an editor draws remote calls in:
// only the hosts that have one.
func TestHostCwds(t *testing.T) {
	marker := testutil.Marker(t)
	gpu, _ := pipeHost(t, "gpu1", marker, "/srv/train")
	gpu.Cwd = "/srv/train"
	build, _ := pipeHost(t, "build", marker, "")
	e := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{gpu, build}}})
	if got, want := e.ts.HostCwds(), map[string]string{"gpu1": "/srv/train"}; !maps.Equal(got, want) {
		t.Errorf("HostCwds = %v, want %v", got, want)
	}
	if got := newEnv(t, envOpts{}).ts.HostCwds(); got != nil {
		t.Errorf("HostCwds without hosts = %v, want nil", got)
	}
}

// noTerminals is an executor with only the seam's methods: a provider
// that offers no terminals.
type noTerminals struct{ shell.Executor }

// TestHostDialCancelled: a foreground call to a host whose connection
// hangs returns as soon as its caller cancels it, not when the dial's
// own timeout ends (the call's context reaches the remote dial).
func TestHostDialCancelled(t *testing.T) {
	t.Parallel()
	testHostDialCancelled(t, false)
}

// TestHostDialCancelledBackground: the same for a background start (the
// task is never made).
func TestHostDialCancelledBackground(t *testing.T) {
	t.Parallel()
	testHostDialCancelled(t, true)
}

func testHostDialCancelled(t *testing.T, background bool) {
	dialing := make(chan struct{}, 1)
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		dialing <- struct{}{}
		<-ctx.Done() // an unreachable host: only the dial's context ends it
		return nil, ctx.Err()
	})
	ex, err := remote.New("slow", d, &remote.Options{DialTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	e := newEnv(t, envOpts{tools: tools.Options{Hosts: []tools.Host{{Name: "slow", Executor: ex}}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan tools.Result, 1)
	go func() {
		done <- e.ts.Call(ctx, e.sess, tools.NameBash, args(t, map[string]any{"command": "true", "description": "Run on the slow host", "host": "slow", "run_in_background": background}), nil)
	}()
	<-dialing
	cancel()
	select {
	case r := <-done:
		if !r.IsError {
			t.Errorf("a call cancelled while dialing: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return within 10 s of its cancellation (the dial's timeout is a minute)")
	}
}
