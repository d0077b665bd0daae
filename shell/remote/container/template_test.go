//go:build linux

package container_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// templateHost is a host name of its own for each test, so that the
// containers of its template are found by their label (TemplateLabel)
// whatever else runs.
func templateHost(t *testing.T) string {
	var b [4]byte
	rand.Read(b[:])
	return "tpl-" + hex.EncodeToString(b[:])
}

// templateContainers are the containers, running or not, of the template
// host called name.
func templateContainers(t *testing.T, engine, name string) []string {
	t.Helper()
	return containertest.Labelled(t, engine, container.TemplateLabel+"="+name)
}

// newTemplate returns a template host of h's test image, whose commands
// carry a marker of t's; at cleanup it closes it, and checks that none
// of its processes and none of its containers is left.
func newTemplate(t *testing.T, engine, bin, name, image string, runArgs ...string) (remotetest.Marked, string) {
	t.Helper()
	marker := testutil.Marker(t)
	tp, err := container.NewTemplate(container.Host{Name: name, Engine: filepath.Base(engine), Image: image},
		&container.Options{EngineBinary: engine, AgentBinary: bin, AgentArgs: []string{"--grace-ms", "500"}, RunArgs: runArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Errorf("close the template: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
		if left := templateContainers(t, engine, name); len(left) > 0 {
			t.Errorf("containers left after Close: %v", left)
		}
	})
	return remotetest.Marked{Executor: tp, Marker: marker}, marker
}

// templateSuiteEnv carries the suite's settings from the root run to a
// run as nobody: the URL of podman's API service, the wrapper and the
// binary.
const templateSuiteEnv = "CONCH_TEST_SUITE_TEMPLATE"

// TestTemplateSuite runs the provider suite through a template host: each
// case's executor is a Template of the test image, so every owner of
// every case gets a container of its own (the owner "" when the case
// makes the executor, the others by their first command), the agent
// deployed into it, its checksum checked, and removed when the case
// closes the executor. Its containers unmask /proc (UnmaskArgs):
// the agent contains and sandboxes the commands as in a running
// container. They share this machine's temporary directory and /usr, as
// TestSuite's container does. A case the suite runs again as nobody
// starts its containers through podman's API service and runs its agent
// as nobody there. Once every case is over, no container of the host is
// left.
func TestTemplateSuite(t *testing.T) {
	var (
		h      *podmanHost
		user   string
		engine []string
	)
	name := "tpl-suite"
	if v := os.Getenv(templateSuiteEnv); v != "" && os.Geteuid() != 0 {
		f := strings.Split(v, "\n")
		if len(f) != 4 {
			t.Fatalf("%s=%q: want URL, image, wrapper and binary, one a line", templateSuiteEnv, v)
		}
		h = &podmanHost{image: f[1], wrapper: f[2], bin: f[3], dir: filepath.Dir(f[2]), stderr: new(testutil.Buffer)}
		user, engine = "65534", []string{"--remote", "--url", f[0]}
	} else {
		h = podman(t)
		name = templateHost(t)
		t.Cleanup(func() {
			if left := templateContainers(t, h.engine, name); len(left) > 0 {
				t.Errorf("containers left by the suite: %v", left)
			}
		})
		url := containertest.Service(t, h.engine)
		// Not parallel: nothing else runs while it sets this.
		os.Setenv(templateSuiteEnv, url+"\n"+h.image+"\n"+h.wrapper+"\n"+h.bin)
		t.Cleanup(func() { os.Unsetenv(templateSuiteEnv) })
	}
	// Each user's cache of agents is a directory of this machine that
	// every container of the suite shares: the first container gets the
	// upload, the others find the agent there (its checksum checked), as
	// on a host that a conch reached before. The upload into a fresh
	// container is TestTemplateSessions' and the serve tests'.
	caches := map[string]string{"/root/.cache": filepath.Join(h.dir, "cache-root"), "/home/nobody/.cache": filepath.Join(h.dir, "cache-nobody")}
	mounts := []string{"-v", "/usr:/usr:ro", "-v", os.TempDir() + ":" + os.TempDir()}
	for in, here := range caches {
		if os.Geteuid() == 0 {
			if err := os.MkdirAll(here, 0o700); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(in, "/home/nobody/") {
				os.Chown(here, 65534, 65534)
			}
		}
		mounts = append(mounts, "-v", here+":"+in)
	}
	if prefix := pythonPrefix(t); !strings.HasPrefix(prefix, "/usr/") {
		mounts = append(mounts, "-v", prefix+":"+prefix+":ro")
	}
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		env, marker := remotetest.AgentEnviron(c)
		environ := remotetest.EnvironFile(t, h.dir, env)
		tp, err := container.NewTemplate(container.Host{Name: name, Engine: "podman", Image: h.image, Cwd: c.Cwd, User: user}, &container.Options{
			EngineBinary: h.wrapper,
			EngineArgs:   engine,
			AgentBinary:  h.bin,
			AgentArgs:    append(remotetest.AgentArgs(c), "--test-environ", environ),
			Stderr:       h.stderr,
			Executor:     remote.Options{Timeout: c.Timeout, MaxTimeout: c.MaxTimeout},
			RunArgs:      mounts,
		})
		if err != nil {
			t.Fatalf("container.NewTemplate: %v", err)
		}
		// The container of the owner the cases use most ("") is started
		// now, as TestSuite connects first: the cases that time a
		// command would otherwise time the container's start too.
		if _, err := tp.Hello(t.Context()); err != nil {
			tp.Close()
			t.Fatalf("start the container: %v\nagent stderr:\n%s", err, h.stderr.String())
		}
		return remotetest.Marked{Executor: tp, Marker: marker}
	})
}

// TestTemplateSessions: a template host starts nothing until a command
// comes; an owner's first command starts one container, which its later
// commands share; another owner gets another container, where the first
// one's files are not; the agent contains and sandboxes the commands in
// it (its /proc is unmasked); ending an owner removes its container and
// what ran there, and leaves the other's; an owner whose container was
// removed behind conch's back gets a new one; Close removes the rest.
func TestTemplateSessions(t *testing.T) {
	t.Parallel()
	h := podman(t)
	name := templateHost(t)
	ex, marker := newTemplate(t, h.engine, h.bin, name, h.image)
	tp := ex.Executor.(*container.Template)
	if got := templateContainers(t, h.engine, name); len(got) != 0 {
		t.Fatalf("containers before the first command: %v", got)
	}
	run := func(owner, command string) shell.Result {
		t.Helper()
		return shelltest.MustRun(t, ex, shell.Request{Command: command, Owner: owner})
	}
	if r := run("a", "echo a > mine; tr '\\0' ' ' < /proc/1/cmdline; echo; touch /etc/x"); !strings.HasPrefix(r.Stdout.Text, "/root/.cache/conch/conch-") ||
		!strings.Contains(r.Stdout.Text, " __init \n") || !strings.Contains(r.Stderr.Text, "touch: /etc/x: Permission denied\n") {
		t.Errorf("a's first command: want it in the PID namespace of the agent's init, and a write to /etc denied: %+v", r)
	}
	first := templateContainers(t, h.engine, name)
	if len(first) != 1 || !slices.Equal(tp.Containers(), first) {
		t.Fatalf("after a's first command: containers %v (the template's: %v), want one", first, tp.Containers())
	}
	if r := run("a", "cat mine; sleep 1000 & echo started"); r.Stdout.Text != "a\nstarted\n" {
		t.Errorf("a's second command: %+v", r)
	}
	if got := templateContainers(t, h.engine, name); !slices.Equal(got, first) {
		t.Errorf("after a's second command: containers %v, want a's %v alone", got, first)
	}
	if r := run("b", "cat mine; sleep 1000 & echo started"); r.Stdout.Text != "started\n" || !strings.Contains(r.Stderr.Text, "mine") {
		t.Errorf("b, in a container of its own, sees a's file: %+v", r)
	}
	both := templateContainers(t, h.engine, name)
	if len(both) != 2 {
		t.Fatalf("after b's first command: containers %v, want two", both)
	}
	testutil.WaitFor(t, 10*time.Second, "both sleeps run", func() bool { return len(testutil.Commands(marker)) == 2 })
	ex.EndOwner("a")
	if got := templateContainers(t, h.engine, name); len(got) != 1 || got[0] == first[0] {
		t.Errorf("after a ended: containers %v, want b's alone (a's was %s)", got, first[0])
	}
	if n := len(testutil.Commands(marker)); n != 1 {
		t.Errorf("after a ended: %d processes of the test, want b's sleep alone", n)
	}
	if r := run("b", "echo still"); r.Stdout.Text != "still\n" {
		t.Errorf("b after a ended: %+v", r)
	}
	// A container removed behind conch's back: the owner's next command
	// gets a new one.
	gone := templateContainers(t, h.engine, name)
	containertest.Remove(h.engine, gone[0])
	// A command sent before the exec client saw its container go (the
	// removal races it on a loaded machine) is lost with it, and says so;
	// the next one gets the new container.
	r := run("b", "echo anew")
	if lost := "[connection to host " + name + " lost; the command was stopped]\n"; r.Stderr.Text == lost {
		r = run("b", "echo anew")
	}
	if r.Stdout.Text != "anew\n" {
		t.Errorf("b after its container was removed: %+v", r)
	}
	if got := templateContainers(t, h.engine, name); len(got) != 1 || got[0] == gone[0] {
		t.Errorf("containers after b's container was removed and b ran again: %v, want a new one (not %s)", got, gone[0])
	}
}

// TestTemplateBadImage: an image the engine cannot start is the
// contract's unreachable error naming the engine's message, and leaves
// no container; the next command tries again.
func TestTemplateBadImage(t *testing.T) {
	t.Parallel()
	h := podman(t)
	name := templateHost(t)
	ex, _ := newTemplate(t, h.engine, h.bin, name, "localhost/conch-no-such-image:1", "--pull=never")
	spec, _ := ex.Resolve(shell.Request{Command: "echo hi"})
	for range 2 {
		_, err := ex.Launch(spec)
		var ue *remote.UnreachableError
		want := "host " + name + " unreachable: podman run localhost/conch-no-such-image:1: Error: localhost/conch-no-such-image:1: image not known; the command did not run"
		if !errors.As(err, &ue) || err.Error() != want {
			t.Errorf("a command on a host whose image is missing: %v, want %q", err, want)
		}
	}
	if got := templateContainers(t, h.engine, name); len(got) != 0 {
		t.Errorf("containers left by a failed start: %v", got)
	}
}

// TestTemplateStale: containers of a conch that died without removing
// them (one killed with SIGKILL) are removed by the next template's first
// start; those of a conch that still runs are left alone.
func TestTemplateStale(t *testing.T) {
	t.Parallel()
	h := podman(t)
	// A process that ran and is gone, and one that runs.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "1000")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { alive.Process.Kill(); alive.Wait() }()
	host, _ := os.Hostname()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	label := func(pid int, start string) string {
		return fmt.Sprintf("%s/%s/%d/%s", host, strings.TrimSpace(string(boot)), pid, start)
	}
	stale := templateHost(t)
	for _, id := range []string{
		label(dead.Process.Pid, "1"), // a pid that runs nothing now, or another process
		label(alive.Process.Pid, startTime(t, alive.Process.Pid)),
		fmt.Sprintf("%s/%s/%d/%s", host, "0-earlier-boot", alive.Process.Pid, startTime(t, alive.Process.Pid)),
		fmt.Sprintf("%s/%s/%d/%s", "another-machine", "0", 1, "1"),
	} {
		containertest.Run(t, h.engine, "run", "-d", "--rm", "--label", container.TemplateLabel+"="+stale, "--label", container.ServerLabel+"="+id,
			"--entrypoint", "sleep", h.image, "3600")
	}
	t.Cleanup(func() {
		for _, c := range templateContainers(t, h.engine, stale) {
			containertest.Remove(h.engine, c)
		}
	})
	ex, _ := newTemplate(t, h.engine, h.bin, templateHost(t), h.image)
	if r := shelltest.MustRun(t, ex, shell.Request{Command: "echo hi"}); r.Stdout.Text != "hi\n" {
		t.Errorf("echo hi: %+v", r)
	}
	var ids []string
	for _, c := range templateContainers(t, h.engine, stale) {
		ids = append(ids, containertest.Run(t, h.engine, "inspect", "--format", `{{index .Config.Labels "`+container.ServerLabel+`"}}`, c))
	}
	slices.Sort(ids)
	want := []string{"another-machine/0/1/1", label(alive.Process.Pid, startTime(t, alive.Process.Pid))}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("containers left of the stale ones: %q, want those of a live process and of another machine %q", ids, want)
	}
}

// startTime is /proc/<pid>/stat's 22nd field.
func startTime(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[19]
}
