//go:build linux

package container_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/shelltest"
)

// TestMain points podman at the tests' configuration, removes the
// containers the tests shared and the engine wrapper's directory, and
// fails the run if goroutines leaked.
func TestMain(m *testing.M) {
	testutil.VerifyTestMain(m, containertest.Setup(), func() {
		if podmanH != nil {
			os.RemoveAll(podmanH.dir)
		}
	})
}

// environWrapper stands in for the engine in the suite, as sshd's
// ForceCommand does over SSH: the suite asks for the environment commands
// start from (shelltest.Config.Environ), and an exec's environment is the
// container's, so an agent started with '--test-environ' FILE among its
// arguments runs under `env -i` with FILE's NUL-separated variables, and
// without those two arguments. Every other exec (the probe, the upload)
// runs as the engine runs it.
const environWrapper = `#!/bin/bash
args=("$@")
for i in "${!args[@]}"; do
	[ "${args[i]}" = --test-environ ] || continue
	mapfile -d '' vars < "${args[i+1]}"
	unset 'args[i]' 'args[i+1]'
	args=("${args[@]}")
	for j in "${!args[@]}"; do
		if [ "${args[j]}" = agent ]; then
			args=("${args[@]:0:j-1}" env -i "${vars[@]}" "${args[@]:j-1}")
			break
		fi
	done
	break
done
exec "$ENGINE" "${args[@]}"
`

// podmanHost is the podman of this machine, the test image and the
// wrapper (environWrapper) shared by the tests of this binary.
type podmanHost struct {
	engine, image, dir, wrapper, bin string
	stderr                           *testutil.Buffer
}

var (
	podmanOnce sync.Once
	podmanH    *podmanHost
)

func podman(t *testing.T) *podmanHost {
	t.Helper()
	engine := containertest.Podman(t)
	bin := testutil.ConchBinary(t)
	img := containertest.Image(t, engine, bin)
	podmanOnce.Do(func() {
		dir, err := os.MkdirTemp("", "conch-podman-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o1777) // the run as nobody makes its environment files here
		wrapper := filepath.Join(dir, "engine")
		if err := os.WriteFile(wrapper, []byte(environWrapper), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Setenv("ENGINE", engine)
		podmanH = &podmanHost{engine: engine, image: img, dir: dir, wrapper: wrapper, bin: bin, stderr: new(testutil.Buffer)}
	})
	if podmanH == nil {
		t.Fatal("containertest: the podman host could not be set up")
	}
	return podmanH
}

// suiteEnv carries the suite's container from the root run to a run as
// nobody: the URL of podman's API service and the container's name.
const suiteEnv = "CONCH_TEST_SUITE_PODMAN"

// TestSuite runs the provider suite against a real conch agent, deployed
// into a running podman container and started with `podman exec -i`,
// with the suite's settings as the agent's flags and its default
// containment and sandbox: the container unmasks /proc, so that each
// session gets its own PID namespace and the sandbox there. The
// container shares this machine's temporary directory, where the suite
// makes its workdirs and spill parents, and this machine's /usr, read
// only, for the perl and python3 some cases run (and python3's prefix
// where it lives elsewhere). Every subtest starts an agent of its own in
// the one container the tests share. A case the suite runs again as
// nobody (testutil.AsUnprivileged) reaches the container through
// podman's API service, which the root run started, and its agent runs
// as nobody there.
func TestSuite(t *testing.T) {
	var (
		h         *podmanHost
		ctr, user string
		engine    []string
	)
	if v := os.Getenv(suiteEnv); v != "" && os.Geteuid() != 0 {
		f := strings.Split(v, "\n")
		if len(f) != 4 {
			t.Fatalf("%s=%q: want URL, container, wrapper and binary, one a line", suiteEnv, v)
		}
		h = &podmanHost{wrapper: f[2], bin: f[3], dir: filepath.Dir(f[2]), stderr: new(testutil.Buffer)}
		ctr, user, engine = f[1], "65534", []string{"--remote", "--url", f[0]}
	} else {
		h = podman(t)
		mounts := []string{"--security-opt", "unmask=/proc/*", "-v", "/usr:/usr:ro"}
		if prefix := pythonPrefix(t); !strings.HasPrefix(prefix, "/usr/") {
			mounts = append(mounts, "-v", prefix+":"+prefix+":ro")
		}
		ctr = containertest.Shared(t, "suite", h.engine, h.image, mounts...)
		// Once every case is over, no agent may be left in the container.
		t.Cleanup(func() { containertest.AssertNoAgents(t, h.engine, ctr) })
		url := containertest.Service(t, h.engine)
		// TestSuite is not parallel: nothing else runs while it sets this.
		os.Setenv(suiteEnv, url+"\n"+ctr+"\n"+h.wrapper+"\n"+h.bin)
		t.Cleanup(func() { os.Unsetenv(suiteEnv) })
	}
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		env, marker := remotetest.AgentEnviron(c)
		environ := remotetest.EnvironFile(t, h.dir, env)
		ex, err := container.New(container.Host{Name: "p1", Engine: "podman", Container: ctr, Cwd: c.Cwd, User: user}, &container.Options{
			EngineBinary: h.wrapper,
			EngineArgs:   engine,
			AgentBinary:  h.bin,
			AgentArgs:    append(remotetest.AgentArgs(c), "--test-environ", environ),
			Stderr:       h.stderr,
			Executor:     remote.Options{Timeout: c.Timeout, MaxTimeout: c.MaxTimeout},
		})
		if err != nil {
			t.Fatalf("container.New: %v", err)
		}
		if _, err := ex.Hello(t.Context()); err != nil {
			ex.Close()
			t.Fatalf("connect: %v\nagent stderr:\n%s", err, h.stderr.String())
		}
		return remotetest.Marked{Executor: ex, Marker: marker}
	})
}

// pythonPrefix is the installation directory of the python3 the suite
// runs (testutil.Python3): the parent of its bin directory.
func pythonPrefix(t *testing.T) string {
	return filepath.Dir(filepath.Dir(testutil.Python3(t)))
}
