//go:build linux

// Package containertest starts real containers for tests of the container
// transport (shell/remote/container): rootful podman with runc, from an
// image it makes in about two seconds without a registry, out of this
// machine's busybox-static, bash-static and the C library the conch
// binary links (.ci/run installs podman, runc, busybox-static and
// bash-static).
//
// The containers share this machine's temporary directory at the same
// path, so that a test's directories (its workdirs, its spill parents)
// are the container's too, and run with no network.
package containertest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
)

// ContainersConf is the podman configuration the tests run with: runc
// (crun refuses cgroup v1 hybrid hosts), cgroupfs without systemd,
// ulimits root may set on a host that denies it CAP_SYS_RESOURCE, and no
// network for any container, those conch starts itself (a template's)
// included.
const ContainersConf = `[containers]
netns = "none"
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`

// Setup writes ContainersConf to a directory of its own and points
// CONTAINERS_CONF at it, for podman and for the engines the tests' code
// starts; it returns the cleanup that removes it. Call it from TestMain.
func Setup() (cleanup func()) {
	dir, err := os.MkdirTemp("", "conch-podman-conf-")
	if err != nil {
		panic(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(ContainersConf), 0o644); err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	os.Setenv("CONTAINERS_CONF", conf)
	// The tests drive podman themselves from a test binary that is a
	// child subreaper (a local executor in it makes it one): the pause
	// process of the rootless user and the conmon of each container
	// become its children, which any local executor's Close would kill
	// as escapees (rootless podman then answers "invalid internal
	// status" to every test after). They are spared, as conch spares
	// those of its own container hosts.
	proc.SpareDaemons("podman", "catatonit", "conmon")
	return func() {
		removeShared()
		os.RemoveAll(dir)
		if rootlessDir != "" {
			os.RemoveAll(rootlessDir)
		}
	}
}

// Podman returns podman's path, failing t when it is missing or not run
// as root.
func Podman(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("containertest: these tests drive rootful podman: run them as root (CI does)")
	}
	p, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal("containertest: no podman: apt-get install -y --no-install-recommends podman runc uidmap busybox-static bash-static (.ci/run does)")
	}
	return p
}

// Run runs engine with args and returns its trimmed stdout, failing t on
// an error.
func Run(t testing.TB, engine string, args ...string) string {
	t.Helper()
	out, err := Output(engine, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Output runs engine with args and stdin and returns its trimmed stdout.
func Output(engine string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command(engine, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(engine), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// etc are the image's files besides its programs.
var etc = map[string]string{
	"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home/nobody:/bin/sh\n",
	"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
}

var (
	imageMu sync.Mutex
	images  = map[string]string{} // engine → image
)

// Image returns the test image of engine ("podman" or "docker", or a
// path), importing it when the engine lacks it. It holds busybox (its
// applets as links), bash, the C library the conch binary at bin needs,
// root's home /root and nobody's /home/nobody. Its tag is a digest of
// what it holds: an image made before by any test is used as it is.
func Image(t testing.TB, engine, bin string) string {
	t.Helper()
	imageMu.Lock()
	defer imageMu.Unlock()
	if img := images[engine]; img != "" {
		return img
	}
	files := map[string]string{"/bin/busybox": "/bin/busybox", "/bin/bash": "/bin/bash-static"} // in the image → here
	libs, err := exec.Command("ldd", bin).Output()
	if err == nil { // a static binary: "not a dynamic executable", status 1
		for _, m := range regexp.MustCompile(`(?m)(/\S+)`).FindAllString(string(libs), -1) {
			files[m] = m
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", etc) // the layout
	for _, in := range sortedKeys(files) {
		b, err := os.ReadFile(files[in])
		if err != nil {
			t.Fatalf("containertest: the image needs %s: %v (apt-get install -y busybox-static bash-static)", files[in], err)
		}
		fmt.Fprintf(h, "%s %d\n", in, len(b))
		h.Write(b)
	}
	img := "localhost/conch-test:" + hex.EncodeToString(h.Sum(nil))[:16]
	if _, err := Output(engine, nil, "image", "inspect", img); err == nil {
		images[engine] = img
		return img
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "etc", "root", "home/nobody", "tmp", "proc", "sys", "dev", "usr/bin", "usr/local/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for in, here := range files {
		b, err := os.ReadFile(here)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, in)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	applets, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatalf("containertest: busybox --list: %v", err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if _, err := os.Lstat(filepath.Join(root, "bin", a)); err == nil {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range etc {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	os.Chmod(filepath.Join(root, "root"), 0o700)
	if err := os.Chown(filepath.Join(root, "home/nobody"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	tar := exec.Command("tar", "-C", root, "--numeric-owner", "-c", ".")
	pipe, err := tar.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tar.Start(); err != nil {
		t.Fatal(err)
	}
	_, err = Output(engine, pipe, "import", "-", img)
	if werr := tar.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("tar: %w", werr)
	}
	if err != nil {
		t.Fatalf("containertest: import the test image: %v", err)
	}
	images[engine] = img
	return img
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// maxLife is how long a test container lives, in seconds, at the most:
// a test binary killed by its timeout runs no cleanup, and its
// containers (run with --rm) then remove themselves.
const maxLife = "3600"

// Start runs a container of image with engine and returns its name; it
// sleeps until it is removed. The container shares this machine's
// temporary directory at the same path and has no network; runArgs are
// more options of `run` (--security-opt unmask=/proc/*, say). The
// container is removed at t's end.
func Start(t testing.TB, engine, image string, runArgs ...string) string {
	t.Helper()
	name, err := start(engine, image, runArgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(engine, name) })
	return name
}

func start(engine, image string, runArgs ...string) (string, error) {
	var b [6]byte
	rand.Read(b[:])
	name := "conch-test-" + hex.EncodeToString(b[:])
	tmp := os.TempDir()
	args := append([]string{"run", "-d", "--rm", "--name", name, "--network", "none", "-v", tmp + ":" + tmp}, runArgs...)
	if _, err := Output(engine, nil, append(args, image, "sleep", maxLife)...); err != nil {
		Remove(engine, name)
		return "", err
	}
	return name, nil
}

// Remove removes the container name at once, killing what runs in it.
func Remove(engine, name string) {
	if filepath.Base(engine) == "docker" {
		Output(engine, nil, "rm", "-f", name) // docker's rm has no -t; -f kills at once
		return
	}
	Output(engine, nil, "rm", "-f", "-t", "0", name)
}

var (
	sharedMu sync.Mutex
	shared   = map[string]sharedContainer{} // key → container
)

type sharedContainer struct{ engine, name string }

// Shared is Start for the whole test binary: the first call for a key
// starts the container, later calls get the same one, and Setup's
// cleanup removes it once the tests are over. Tests that share one must
// leave nothing running in it (the suite's checks see to it).
func Shared(t testing.TB, key, engine, image string, runArgs ...string) string {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if c, ok := shared[key]; ok {
		return c.name
	}
	name, err := start(engine, image, runArgs...)
	if err != nil {
		t.Fatal(err)
	}
	shared[key] = sharedContainer{engine, name}
	return name
}

func removeShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for k, c := range shared {
		Remove(c.engine, c.name)
		delete(shared, k)
	}
	if service != nil {
		service.Process.Kill()
		service.Wait()
		os.RemoveAll(serviceDir)
		service = nil
	}
	stopDockerLocked()
}

var (
	service    *exec.Cmd // podman's API service, once started
	serviceDir string
	serviceURL string
)

// Service starts podman's API service (`podman system service`) on a
// socket everyone may connect to, once per test binary, and returns its
// URL for `podman --remote --url`: a test run as an unprivileged user
// (testutil.AsUnprivileged) reaches the rootful engine through it. Setup's
// cleanup stops it.
func Service(t testing.TB, engine string) string {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if service != nil {
		return serviceURL
	}
	dir, err := os.MkdirTemp("", "conch-podman-api-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "podman.sock")
	cmd := exec.Command(engine, "system", "service", "--time=0", "unix://"+sock)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("containertest: podman system service: %v", err)
	}
	service, serviceDir, serviceURL = cmd, dir, "unix://"+sock
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("containertest: podman system service did not listen within 30 s")
		}
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return serviceURL
}

// AssertNoAgents fails t if a conch agent (or an init of one) still runs
// in the container name after five seconds. It looks from this machine
// (agentsHere) where it can, and through the engine's exec otherwise.
func AssertNoAgents(t testing.TB, engine, name string) {
	t.Helper()
	var left string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		out, ok := agentsHere(engine, name)
		if !ok {
			var err error
			out, err = Output(engine, nil, "exec", name, "sh", "-c", `for p in /proc/[0-9]*; do echo "$(cut -d' ' -f1,3,4 $p/stat) $(tr '\0' ' ' < $p/cmdline)"; done | grep -e '/conch-[0-9a-f]* ' || true`)
			if err != nil {
				t.Errorf("containertest: list the processes of %s: %v", name, err)
				return
			}
		}
		if left = out; left == "" {
			return
		}
	}
	t.Errorf("containertest: agents left in container %s:\n%s", name, left)
}

var (
	idMu sync.Mutex
	ids  = map[string]string{} // engine + " " + container name → its id
)

// agentRE is an agent's or its init's command line: the deployed build.
var agentRE = regexp.MustCompile(`/conch-[0-9a-f]{16} `)

// agentsHere lists the agents running in the container name as this
// machine's /proc shows them, one "<pid> <command line>" line each. A
// rootful engine puts every process of a container, those its exec
// starts and their inits' commands included, in cgroups whose paths
// hold the container's id; ok is false where no process here is in one
// (a rootless engine on cgroup v1 makes none), and the caller asks the
// engine instead. It costs /proc reads where an exec costs the engine's
// start (about a third of a CPU-second for podman).
func agentsHere(engine, name string) (left string, ok bool) {
	key := engine + " " + name
	idMu.Lock()
	id := ids[key]
	idMu.Unlock()
	if id == "" {
		out, err := Output(engine, nil, "inspect", "-f", "{{.Id}}", name)
		if err != nil || len(out) != 64 {
			return "", false
		}
		id = out
		idMu.Lock()
		ids[key] = id
		idMu.Unlock()
	}
	dirs, _ := os.ReadDir("/proc")
	var b strings.Builder
	for _, d := range dirs {
		pid := d.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
		if err != nil || !bytes.Contains(cg, []byte(id)) {
			continue
		}
		ok = true
		cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		line := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		if agentRE.MatchString(line) {
			fmt.Fprintf(&b, "%s %s\n", pid, line)
		}
	}
	return b.String(), ok
}

// Labelled returns the names of the containers (running or not) that
// carry label, "key" or "key=value", sorted.
func Labelled(t testing.TB, engine, label string) []string {
	t.Helper()
	out := Run(t, engine, "ps", "-a", "--filter", "label="+label, "--format", "{{.Names}}")
	names := strings.Fields(out)
	slices.Sort(names)
	return names
}
