//go:build linux

package container_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/shelltest"
)

// newExec returns an executor for a host that is ctr, through the real
// podman, whose commands carry a marker of t's; at cleanup it closes it
// and checks that nothing of it is left. (Tests check the container for
// agents once all of theirs are closed: plainContainer.)
func newExec(t *testing.T, h *podmanHost, host container.Host) (remotetest.Marked, string) {
	t.Helper()
	marker := testutil.Marker(t)
	ex, err := container.New(host, &container.Options{AgentBinary: h.bin, AgentArgs: []string{"--grace-ms", "500"}, Stderr: h.stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ex.Close()
		testutil.AssertNoProcesses(t, marker)
	})
	return remotetest.Marked{Executor: ex, Marker: marker}, marker
}

// plainContainer is the container of the engine's defaults (/proc
// masked) that this binary's tests share. Once t's executors are closed,
// it checks that no agent is left in it.
func plainContainer(t *testing.T, h *podmanHost) string {
	t.Helper()
	ctr := containertest.Shared(t, "plain", h.engine, h.image)
	t.Cleanup(func() { containertest.AssertNoAgents(t, h.engine, ctr) })
	return ctr
}

// TestExecClientKilled: when the exec client dies (SIGKILL of `podman
// exec`), a running call ends as lost with the contract's line, the agent
// and everything it started in the container end, and the next call
// starts a new agent.
func TestExecClientKilled(t *testing.T) {
	h := podman(t)
	ctr := plainContainer(t, h)
	ex, marker := newExec(t, h, container.Host{Name: "box", Engine: "podman", Container: ctr})
	spec, _ := ex.Resolve(shell.Request{Command: "echo started; sleep 1000"})
	p, err := ex.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	shelltest.ReadUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "started\n" })
	testutil.WaitFor(t, 10*time.Second, "sleep 1000 runs", func() bool { return len(testutil.Commands(marker)) > 0 })
	killExecClient(t, ctr)
	shelltest.WaitDone(t, p, 20*time.Second)
	want := remote.LostMarker("box") + "\n"
	if r := p.Result(); !strings.HasSuffix(r.Stderr.Text, want) || p.Status() != shell.StatusKilled {
		t.Errorf("the call whose exec client died: %s %+v, want stderr ending %q", p.Status(), r, want)
	}
	testutil.AssertNoProcesses(t, marker) // within 3 s: the agent saw its input end
	containertest.AssertNoAgents(t, h.engine, ctr)
	if r := shelltest.MustRun(t, ex, shell.Request{Command: "echo again"}); r.Stdout.Text != "again\n" {
		t.Errorf("after the loss: %+v", r)
	}
}

// TestNoHome: the agent always gets a working directory: the host's cwd,
// else the container user's home; a user whose home is / (one the
// image's passwd does not list) is refused, before anything is uploaded.
func TestNoHome(t *testing.T) {
	h := podman(t)
	ctr := plainContainer(t, h)
	ex, _ := newExec(t, h, container.Host{Name: "box", Engine: "podman", Container: ctr, User: "4321"})
	_, err := ex.Hello(t.Context())
	var ue *remote.UnreachableError
	want := `the container's user has no home directory to work in (HOME="/"); set the host's cwd`
	if !errors.As(err, &ue) || !strings.HasSuffix(err.Error(), want+"; the command did not run") {
		t.Errorf("a user whose home is /: %v, want it unreachable: %s", err, want)
	}
	ex, _ = newExec(t, h, container.Host{Name: "box", Engine: "podman", Container: ctr, User: "nobody"})
	if r := shelltest.MustRun(t, ex, shell.Request{Command: "id -u; pwd"}); r.Stdout.Text != "65534\n/home/nobody\n" {
		t.Errorf("as nobody: %+v", r)
	}
	ex, _ = newExec(t, h, container.Host{Name: "box", Engine: "podman", Container: ctr, Cwd: "/tmp"})
	if r := shelltest.MustRun(t, ex, shell.Request{Command: "pwd"}); r.Stdout.Text != "/tmp\n" {
		t.Errorf("with cwd /tmp: %+v", r)
	}
	ex, _ = newExec(t, h, container.Host{Name: "box", Engine: "podman", Container: ctr})
	if hello, err := ex.Hello(t.Context()); err != nil || hello.Cwd != "/root" {
		t.Errorf("root's agent: %+v, %v; want it in /root", hello, err)
	}
}

// killExecClient SIGKILLs the exec client of the one agent in ctr: this
// process's child running `<engine> … exec -i … <ctr> …/conch-<hash> agent …`.
func killExecClient(t *testing.T, ctr string) {
	t.Helper()
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var clients []int
	for _, i := range infos {
		if c := testutil.Cmdline(i.Pid); strings.Contains(c, " exec -i ") && strings.Contains(c, " "+ctr+" ") && strings.Contains(c, " agent ") {
			clients = append(clients, i.Pid)
		}
	}
	if len(clients) != 1 {
		t.Fatalf("exec clients of the agent: %v, want one", clients)
	}
	if err := syscall.Kill(clients[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
