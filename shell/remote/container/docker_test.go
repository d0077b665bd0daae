//go:build linux

package container_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestDocker: the same transport through docker (a dockerd the test
// starts, Debian's docker.io): in a container with docker's defaults the
// agent works in /root without containment, naming docker's options that
// would give it; in one with /proc unmasked and seccomp letting it make
// user namespaces it contains its commands and sandboxes them; a SIGKILL
// of `docker exec` ends the call as lost and everything the agent
// started.
func TestDocker(t *testing.T) {
	engine := containertest.Docker(t)
	bin := testutil.ConchBinary(t)
	img := containertest.Image(t, engine, bin)
	stderr := new(testutil.Buffer)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	newExec := func(t *testing.T, ctr string) (remotetest.Marked, string) {
		marker := testutil.Marker(t)
		ex, err := container.New(container.Host{Name: "dk", Engine: "docker", Container: ctr},
			&container.Options{AgentBinary: bin, AgentArgs: []string{"--grace-ms", "500"}, Stderr: stderr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ex.Close()
			testutil.AssertNoProcesses(t, marker)
			containertest.AssertNoAgents(t, engine, ctr)
		})
		return remotetest.Marked{Executor: ex, Marker: marker}, marker
	}

	t.Run("Defaults", func(t *testing.T) {
		ctr := containertest.Start(t, engine, img)
		ex, marker := newExec(t, ctr)
		hello, err := ex.Hello(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := "operation not permitted (this container refuses user namespaces and masks /proc; docker with --security-opt systempaths=unconfined and a seccomp profile that allows user namespaces)); sandbox: "; hello.Cwd != "/root" ||
			!strings.Contains(hello.Enforces, want) {
			t.Errorf("hello in a default docker container: %+v, want cwd /root and containment none naming %q", hello, want)
		}
		spec, _ := ex.Resolve(shell.Request{Command: "pwd; test -e /.dockerenv && echo in docker; sleep 1000"})
		p, err := ex.Launch(spec)
		if err != nil {
			t.Fatal(err)
		}
		shelltest.ReadUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "/root\nin docker\n" })
		testutil.WaitFor(t, 10*time.Second, "sleep 1000 runs", func() bool { return len(testutil.Commands(marker)) > 0 })
		killExecClient(t, ctr)
		shelltest.WaitDone(t, p, 20*time.Second)
		if r := p.Result(); !strings.HasSuffix(r.Stderr.Text, remote.LostMarker("dk")+"\n") || p.Status() != shell.StatusKilled {
			t.Errorf("the call whose exec client died: %s %+v", p.Status(), r)
		}
		testutil.AssertNoProcesses(t, marker)
		containertest.AssertNoAgents(t, engine, ctr)
	})

	t.Run("Unmasked", func(t *testing.T) {
		ctr := containertest.Start(t, engine, img, "--security-opt", "systempaths=unconfined", "--security-opt", "seccomp=unconfined")
		ex, _ := newExec(t, ctr)
		r := shelltest.MustRun(t, ex, shell.Request{Command: "tr '\\0' ' ' < /proc/1/cmdline; echo; touch ok && rm ok && echo wrote; touch /etc/x"})
		if got := r.Stdout.Text; !strings.Contains(got, "/conch-") || !strings.Contains(got, " __init \nwrote\n") ||
			!strings.Contains(r.Stderr.Text, "touch: /etc/x: Permission denied") {
			t.Errorf("in an unmasked docker container: %q / %q, want the init as pid 1, a write in /root, /etc/x denied", got, r.Stderr.Text)
		}
	})
}

// TestDockerTemplate: a template host through docker: each owner's first
// command starts a container of the image (docker's options that unmask
// /proc and let the agent make user namespaces: its init is pid 1 of the
// commands, and a write to /etc is denied), ending the owner removes it;
// an image docker cannot start is the contract's unreachable error with
// docker's message, and leaves nothing.
func TestDockerTemplate(t *testing.T) {
	engine := containertest.Docker(t)
	bin := testutil.ConchBinary(t)
	img := containertest.Image(t, engine, bin)
	name := templateHost(t)
	ex, marker := newTemplate(t, engine, bin, name, img, "--network", "none")
	run := func(owner, command string) shell.Result {
		t.Helper()
		return shelltest.MustRun(t, ex, shell.Request{Command: command, Owner: owner})
	}
	r := run("a", "tr '\\0' ' ' < /proc/1/cmdline; echo; test -e /.dockerenv && echo in docker; touch /etc/x; sleep 1000 &")
	if got := r.Stdout.Text; !strings.HasPrefix(got, "/root/.cache/conch/conch-") || !strings.Contains(got, " __init \nin docker\n") ||
		!strings.Contains(r.Stderr.Text, "touch: /etc/x: Permission denied") {
		t.Errorf("a's first command: %+v, want the init as pid 1, in docker, /etc/x denied", r)
	}
	if r := run("b", "echo b"); r.Stdout.Text != "b\n" {
		t.Errorf("b's first command: %+v", r)
	}
	both := templateContainers(t, engine, name)
	if len(both) != 2 {
		t.Fatalf("containers after two owners' commands: %v, want two", both)
	}
	ex.EndOwner("a")
	if got := templateContainers(t, engine, name); len(got) != 1 {
		t.Errorf("containers after a ended: %v, want b's alone", got)
	}
	if n := len(testutil.Commands(marker)); n != 0 {
		t.Errorf("after a ended: %d processes of a left", n)
	}

	bad := templateHost(t)
	ex, _ = newTemplate(t, engine, bin, bad, "localhost/conch-no-such-image:1", "--network", "none", "--pull=never")
	spec, _ := ex.Resolve(shell.Request{Command: "echo hi"})
	_, err := ex.Launch(spec)
	want := "host " + bad + " unreachable: docker run localhost/conch-no-such-image:1: docker: Error response from daemon: No such image: localhost/conch-no-such-image:1; the command did not run"
	if err == nil || err.Error() != want {
		t.Errorf("a command on a host whose image is missing: %v, want %q", err, want)
	}
}
