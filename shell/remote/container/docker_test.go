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
		testutil.WaitFor(t, 10*time.Second, "sleep 1000 runs", func() bool { return len(testutil.Processes(marker)) > 0 })
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
