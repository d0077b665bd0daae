//go:build linux

// Package kubetest runs a real single-node Kubernetes for the tests of the
// kubernetes transport (shell/remote/kube): Debian's etcd and containerd
// (with runc), and kube-apiserver and kubelet of Version built from the Go
// module proxy (Binaries), each with its own directories, sockets and
// ports on 127.0.0.1. There is no scheduler, controller manager, network
// plugin or registry: pods are bound by nodeName (localhost), use the
// host's network, and run an image the fixture imports into containerd
// (the image of internal/containertest, made from this machine's
// busybox-static and bash-static with podman).
//
// The tests run only when CONCH_KUBE_TESTS=1 (Enabled): the first build
// takes about 12.5 CPU-minutes.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/proc"
	"golang.org/x/sys/unix"
)

// EnableEnv is the variable that turns the tests on.
const EnableEnv = "CONCH_KUBE_TESTS"

// Enabled skips t unless EnableEnv is 1, saying why.
func Enabled(t testing.TB) {
	t.Helper()
	if os.Getenv(EnableEnv) != "1" {
		t.Skip("the Kubernetes tests run a real cluster (kube-apiserver and kubelet " + Version +
			" built once, about 12.5 CPU-minutes, etcd-server and containerd from Debian): set " + EnableEnv + "=1")
	}
}

// Node is the node's name: pods are bound to it by spec.nodeName.
const Node = "localhost"

// Cluster is a running single-node cluster.
type Cluster struct {
	// Kubeconfig is a kubeconfig file for it (context "conch-test",
	// namespace "default", a token of the system:masters group).
	Kubeconfig string
	// Image is the test image in containerd: busybox, bash and the C
	// library of the conch binary (containertest.Image).
	Image string
	// Started is how long the cluster took to answer, the binaries
	// built; Built is how long their build took (0 when cached).
	Started, Built time.Duration

	dir, server, token string
	sock               string // containerd's socket
	kubeletArgs        []string
	kubeletPort        int
	http               *http.Client

	mu    sync.Mutex
	procs map[string]*daemon // by name: etcd, containerd, kube-apiserver, kubelet
}

// daemon is a process of the cluster. It is reaped by polling, not by a
// goroutine in Wait: the cluster lives past the tests' leak check until
// TestMain's cleanup stops it. Its pid is claimed (proc.StartCmd) until
// then: a daemon is a child of the test binary in a process group of its
// own, which a local provider's KillAll in the same binary (a benchmark
// against the local provider) would otherwise take for an escapee.
type daemon struct {
	cmd  *exec.Cmd
	log  *os.File
	done bool
}

// exited reports whether the daemon exited, reaping it.
func (d *daemon) exited() bool {
	if !d.done {
		var ws unix.WaitStatus
		if pid, err := unix.Wait4(d.cmd.Process.Pid, &ws, unix.WNOHANG, nil); pid == d.cmd.Process.Pid || err != nil {
			d.done = true
			proc.Release(d.cmd.Process.Pid)
		}
	}
	return d.done
}

// end signals the daemon and waits, killing it after wait.
func (d *daemon) end(sig syscall.Signal, wait time.Duration) {
	d.cmd.Process.Signal(sig)
	for deadline := time.Now().Add(wait); !d.exited(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			d.cmd.Process.Signal(syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
	}
	d.log.Close()
}

// hostTmp is this machine's temporary directory as the test binary
// found it: the cluster's own directory is made there, outside the one
// SetUp gives the tests.
var hostTmp = os.TempDir()

// tmpEnv carries SetUp's directory to the test binary's children (its
// runs as nobody, which testutil.AsUnprivileged starts with TMPDIR
// emptied).
const tmpEnv = "CONCH_KUBE_TEST_TMP"

// SetUp, called from TestMain before the tests run (when they are
// enabled), gives the test binary a temporary directory of its own
// (TMPDIR), mode 1777 like /tmp since the runs as nobody make theirs
// there too. It is the directory a pod that shares the tests' temporary
// directory mounts (PodOptions.ShareTmp), rather than this machine's
// /tmp: a bind mount carries the mounts under its source into the pod,
// and /tmp holds the cluster's own directory (the root file systems of
// its containers, their procfs and cgroup mounts, in directories only
// root may enter) and whatever other programs mount there. A child of
// such a binary (a run as nobody) uses its parent's directory. It
// returns the cleanup that removes the directory.
func SetUp() (cleanup func()) {
	if os.Getenv(EnableEnv) != "1" {
		return func() {}
	}
	if dir := os.Getenv(tmpEnv); dir != "" {
		os.Setenv("TMPDIR", dir)
		return func() {}
	}
	dir, err := os.MkdirTemp(hostTmp, "conch-kube-tmp-")
	if err != nil {
		panic(err)
	}
	if err := os.Chmod(dir, 0o1777); err != nil {
		panic(err)
	}
	os.Setenv("TMPDIR", dir)
	os.Setenv(tmpEnv, dir)
	return func() {
		os.Setenv("TMPDIR", hostTmp)
		os.Unsetenv(tmpEnv)
		os.RemoveAll(dir)
	}
}

var (
	sharedMu  sync.Mutex
	shared    *Cluster
	sharedErr error
)

// Shared returns the cluster of this test binary, starting it on first
// use (after Enabled). Stop, from TestMain, ends it.
func Shared(t testing.TB, conchBinary string) *Cluster {
	t.Helper()
	Enabled(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start(t, conchBinary)
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Stop ends the shared cluster, if one was started, and everything it
// ran: pods, shims, daemons, mounts, directories; it removes KubeConch's
// build. Call it from TestMain; it returns an error when a process of the
// cluster was left.
func Stop() error {
	removeKubeConch()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		return nil
	}
	err := shared.stop()
	shared = nil
	return err
}

func start(t testing.TB, conchBinary string) (*Cluster, error) {
	bins, built, err := Binaries()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "containerd", "containerd-shim-runc-v2", "runc", "ctr"} {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("kubetest: no %s: apt-get install -y etcd-server containerd runc", b)
		}
	}
	// The image first: podman makes it, before any daemon of the cluster runs.
	podman := containertest.Podman(t)
	img := containertest.Image(t, podman, conchBinary)
	begin := time.Now()
	dir, err := os.MkdirTemp(hostTmp, "conch-kube-")
	if err != nil {
		return nil, err
	}
	// The kubeconfig is read by the tests' runs as nobody too.
	os.Chmod(dir, 0o755)
	c := &Cluster{dir: dir, Built: built, procs: map[string]*daemon{}}
	if err := c.up(bins, podman, img); err != nil {
		c.stop()
		return nil, err
	}
	c.Started = time.Since(begin)
	return c, nil
}

func (c *Cluster) path(p ...string) string { return filepath.Join(append([]string{c.dir}, p...)...) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts(n int) ([]int, error) {
	var ps []int
	for range n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if slices.Contains(ps, p) {
			continue
		}
		ps = append(ps, p)
	}
	if len(ps) != n {
		return freePorts(n)
	}
	return ps, nil
}

// run starts a daemon of the cluster, its output in a log of its own.
func (c *Cluster) run(name string, argv ...string) error {
	log, err := os.Create(c.path("log", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := proc.StartCmd(cmd); err != nil {
		log.Close()
		return fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	d := &daemon{cmd: cmd, log: log}
	c.mu.Lock()
	c.procs[name] = d
	c.mu.Unlock()
	return nil
}

// Log is the end of a daemon's log, for a failure's message.
func (c *Cluster) Log(name string) string {
	b, _ := os.ReadFile(c.path("log", name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitFor polls cond until it holds or d passes; the error names what
// was awaited and the log of daemon.
func (c *Cluster) waitFor(d time.Duration, what, daemon string, cond func() bool) error {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return nil
		}
		c.mu.Lock()
		dm := c.procs[daemon]
		c.mu.Unlock()
		if dm != nil && dm.exited() {
			return fmt.Errorf("kubetest: %s exited while waiting for %s:\n%s", daemon, what, c.Log(daemon))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubetest: %s: not within %v; %s's log:\n%s", what, d, daemon, c.Log(daemon))
		}
	}
}

func (c *Cluster) up(bins, podman, img string) error {
	for _, d := range []string{"log", "pki", "etcd", "containerd/root", "containerd/state", "containerd/cni", "kubelet/root", "kubelet/pods-logs", "images"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	etcdPort, etcdPeer, apiPort, kubeletPort, healthz := ports[0], ports[1], ports[2], ports[3], ports[4]
	pki, err := makePKI(c.path("pki"))
	if err != nil {
		return err
	}
	c.token = pki.token
	c.server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	c.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}

	// etcd
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := c.run("etcd", "etcd", "--data-dir", c.path("etcd"), "--name", "conch-test",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster", "conch-test=http://127.0.0.1:"+strconv.Itoa(etcdPeer)); err != nil {
		return err
	}
	// containerd
	c.sock = c.path("containerd", "containerd.sock")
	conf := fmt.Sprintf(containerdConf, c.path("containerd/root"), c.path("containerd/state"), c.sock, c.sock+".ttrpc", PauseImage, c.path("containerd/cni"), c.path("containerd/cni"))
	if err := os.WriteFile(c.path("containerd", "config.toml"), []byte(conf), 0o600); err != nil {
		return err
	}
	if err := c.run("containerd", "containerd", "--config", c.path("containerd", "config.toml")); err != nil {
		return err
	}
	// kube-apiserver
	tokens := pki.token + ",admin,admin,system:masters\n"
	if err := os.WriteFile(c.path("pki", "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	if err := c.waitFor(30*time.Second, "etcd answers", "etcd", func() bool {
		r, err := c.http.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	}); err != nil {
		return err
	}
	if err := c.run("kube-apiserver", filepath.Join(bins, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", c.path("pki", "server.crt"), "--tls-private-key-file", c.path("pki", "server.key"),
		"--client-ca-file", c.path("pki", "ca.crt"),
		"--token-auth-file", c.path("pki", "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--allow-privileged=true",
		"--disable-admission-plugins", "ServiceAccount",
		"--endpoint-reconciler-type", "none",
		"--kubelet-preferred-address-types", "Hostname",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", c.path("pki", "sa.key"),
		"--service-account-signing-key-file", c.path("pki", "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--enable-priority-and-fairness=false",
		"--profiling=false"); err != nil {
		return err
	}
	// The kubeconfig of the tests and of the kubelet.
	c.Kubeconfig = c.path("kubeconfig")
	kc := fmt.Sprintf(kubeconfig, c.server, base64.StdEncoding.EncodeToString(pki.caPEM), pki.token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o644); err != nil {
		return err
	}
	// The images, while the API server starts.
	if err := c.waitFor(30*time.Second, "containerd answers", "containerd", func() bool {
		_, err := c.ctr("version")
		return err == nil
	}); err != nil {
		return err
	}
	if err := c.importImages(podman, img); err != nil {
		return err
	}
	if err := c.waitFor(90*time.Second, "kube-apiserver is ready", "kube-apiserver", func() bool {
		_, code, err := c.API("GET", "/readyz", nil)
		return err == nil && code == 200
	}); err != nil {
		return err
	}
	if err := c.waitFor(30*time.Second, "namespace default exists", "kube-apiserver", func() bool {
		_, code, err := c.API("GET", "/api/v1/namespaces/default", nil)
		return err == nil && code == 200
	}); err != nil {
		return err
	}
	// kubelet
	c.kubeletPort = kubeletPort
	kconf := fmt.Sprintf(kubeletConf, kubeletPort, healthz, "unix://"+c.sock, c.path("kubelet", "pods-logs"))
	if err := os.WriteFile(c.path("kubelet", "config.yaml"), []byte(kconf), 0o600); err != nil {
		return err
	}
	c.kubeletArgs = []string{filepath.Join(bins, "kubelet"), "--config", c.path("kubelet", "config.yaml"),
		"--kubeconfig", c.Kubeconfig, "--hostname-override", Node,
		"--root-dir", c.path("kubelet", "root"), "--cert-dir", c.path("kubelet", "pki")}
	return c.startKubelet()
}

// startKubelet starts the kubelet and waits until its node is registered.
func (c *Cluster) startKubelet() error {
	if err := c.run("kubelet", c.kubeletArgs...); err != nil {
		return err
	}
	// Registered is enough: with no network plugin the node stays
	// NotReady (NetworkPluginNotReady), and pods on the host's network
	// run all the same.
	return c.waitFor(90*time.Second, "node "+Node+" is registered and its kubelet listens", "kubelet", func() bool {
		_, code, err := c.API("GET", "/api/v1/nodes/"+Node, nil)
		if err != nil || code != 200 {
			return false
		}
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(c.kubeletPort))
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

// KillKubelet SIGKILLs the kubelet (its pods keep running in
// containerd), and returns once it is dead.
func (c *Cluster) KillKubelet() {
	c.mu.Lock()
	d := c.procs["kubelet"]
	delete(c.procs, "kubelet")
	c.mu.Unlock()
	if d != nil {
		d.end(syscall.SIGKILL, time.Minute)
	}
}

// RestartKubelet starts the kubelet again after KillKubelet and waits
// until its node is ready.
func (c *Cluster) RestartKubelet() error { return c.startKubelet() }

// PauseImage is the sandbox image of the pods, imported by the fixture.
const PauseImage = "localhost/conch-pause:1"

// importImages imports the test image, and a pause image made of it
// whose command sleeps, into containerd's k8s.io namespace.
func (c *Cluster) importImages(podman, img string) error {
	c.Image = img
	pauseCtr := "conch-kube-pause-" + randHex(4)
	if _, err := containertest.Output(podman, nil, "create", "--name", pauseCtr, img, "true"); err != nil {
		return err
	}
	_, err := containertest.Output(podman, nil, "commit", "-q", "--change", `ENTRYPOINT ["/bin/sleep", "2147483647"]`, "--change", `CMD []`, pauseCtr, PauseImage)
	containertest.Output(podman, nil, "rm", "-f", pauseCtr)
	if err != nil {
		return err
	}
	for _, ref := range []string{img, PauseImage} {
		archive := c.path("images", randHex(4)+".tar")
		if _, err := containertest.Output(podman, nil, "save", "--format", "oci-archive", "-o", archive, ref); err != nil {
			return err
		}
		if _, err := c.ctr("images", "import", "--base-name", strings.Split(ref, ":")[0], "--index-name", ref, archive); err != nil {
			return err
		}
		os.Remove(archive)
	}
	return nil
}

// ctr runs containerd's ctr in the namespace of the kubelet's pods.
func (c *Cluster) ctr(args ...string) (string, error) {
	return containertest.Output("ctr", nil, append([]string{"--address", c.sock, "-n", "k8s.io"}, args...)...)
}

// API calls the API server with the cluster's token; body is JSON.
func (c *Cluster) API(method, path string, body []byte) ([]byte, int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.server+path, r)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// PodOptions are what the tests' pods (PodSpec) differ by; the zero
// value is a pod of Kubernetes' defaults: /proc masked, the image's user,
// no volume.
type PodOptions struct {
	// Privileged unmasks /proc (and lets the agent contain its commands).
	Privileged bool
	// UID, when not nil, is the container's user and group.
	UID *int
	// ShareTmp mounts the tests' temporary directory (SetUp's) at the
	// same path: the tests' directories are the pod's, as in
	// containertest. It is a directory of the tests' own, not /tmp: a
	// bind mount of /tmp would carry the mounts under it into the pod,
	// the procfs of the cluster's own containers among them, and one
	// fully visible procfs in the pod's mount namespace is enough for the
	// kernel to allow a fresh /proc mount that a masked /proc refuses.
	ShareTmp bool
	// ReadOnly are host directories (/usr, say) mounted at the same path,
	// read only.
	ReadOnly []string
}

// PodSpec is a pod of the test image bound to the node, on the host's
// network, that sleeps, as o says. Its container's environment carries
// marker, so that testutil.Processes(marker) lists what runs in it.
func (c *Cluster) PodSpec(name, marker string, o PodOptions) map[string]any {
	var mounts, volumes []any
	if o.ShareTmp {
		tmp := os.TempDir()
		mounts = append(mounts, map[string]any{"name": "tmp", "mountPath": tmp})
		volumes = append(volumes, map[string]any{"name": "tmp", "hostPath": map[string]any{"path": tmp}})
	}
	for i, p := range o.ReadOnly {
		v := "ro" + strconv.Itoa(i)
		mounts = append(mounts, map[string]any{"name": v, "mountPath": p, "readOnly": true})
		volumes = append(volumes, map[string]any{"name": v, "hostPath": map[string]any{"path": p}})
	}
	sc := map[string]any{"privileged": o.Privileged}
	if o.UID != nil {
		sc["runAsUser"], sc["runAsGroup"] = *o.UID, *o.UID
	}
	ctr := map[string]any{
		"name": "main", "image": c.Image, "imagePullPolicy": "Never",
		"command":         []string{"sleep", "3600"},
		"env":             []any{map[string]any{"name": "CONCH_TEST_POD", "value": marker}},
		"securityContext": sc,
	}
	spec := map[string]any{
		"nodeName": Node, "hostNetwork": true, "restartPolicy": "Never",
		"terminationGracePeriodSeconds": 0,
		"containers":                    []any{ctr},
	}
	if len(mounts) > 0 {
		ctr["volumeMounts"], spec["volumes"] = mounts, volumes
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}
}

// Pod creates a pod from spec (PodSpec), waits until it is ready, and
// deletes it at t's end.
func (c *Cluster) Pod(t testing.TB, spec map[string]any) string {
	t.Helper()
	name := spec["metadata"].(map[string]any)["name"].(string)
	b, _ := json.Marshal(spec)
	out, code, err := c.API("POST", "/api/v1/namespaces/default/pods", b)
	if err != nil || code != 201 {
		t.Fatalf("kubetest: create pod %s: %d %v: %s", name, code, err, out)
	}
	t.Cleanup(func() { c.DeletePod(t, name) })
	if err := c.waitFor(60*time.Second, "pod "+name+" is ready", "kubelet", func() bool { return c.PodReady(name) }); err != nil {
		b, _, _ := c.API("GET", "/api/v1/namespaces/default/pods/"+name, nil)
		t.Fatalf("%v\npod: %s", err, b)
	}
	return name
}

// PodReady reports whether the pod's Ready condition is true.
func (c *Cluster) PodReady(name string) bool {
	b, code, err := c.API("GET", "/api/v1/namespaces/default/pods/"+name, nil)
	if err != nil || code != 200 {
		return false
	}
	var p struct {
		Status struct {
			Conditions []struct{ Type, Status string } `json:"conditions"`
		} `json:"status"`
	}
	json.Unmarshal(b, &p)
	for _, cd := range p.Status.Conditions {
		if cd.Type == "Ready" {
			return cd.Status == "True"
		}
	}
	return false
}

// Pods lists the names of the pods of namespace default.
func (c *Cluster) Pods(t testing.TB) []string {
	t.Helper()
	b, code, err := c.API("GET", "/api/v1/namespaces/default/pods", nil)
	if err != nil || code != 200 {
		t.Fatalf("kubetest: list pods: %d %v: %s", code, err, b)
	}
	var l struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	json.Unmarshal(b, &l)
	var names []string
	for _, it := range l.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

// DeletePod deletes a pod at once and waits until the API server no
// longer has it.
func (c *Cluster) DeletePod(t testing.TB, name string) {
	t.Helper()
	c.API("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil)
	if err := c.waitFor(30*time.Second, "pod "+name+" is deleted", "kube-apiserver", func() bool {
		_, code, err := c.API("GET", "/api/v1/namespaces/default/pods/"+name, nil)
		return err == nil && code == 404
	}); err != nil {
		t.Error(err)
	}
}

// stop ends everything of the cluster, in the order that leaves nothing:
// the kubelet (so that it restarts nothing), every container and
// sandbox in containerd (their shims exit), the daemons, the mounts
// under the cluster's directory; then it looks for any process left.
func (c *Cluster) stop() error {
	c.drainPods()
	c.KillKubelet()
	if c.sock != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			out, err := c.ctr("tasks", "ls", "-q")
			if err != nil || strings.TrimSpace(out) == "" {
				break
			}
			for _, id := range strings.Fields(out) {
				c.ctr("tasks", "kill", "-s", "SIGKILL", id)
				c.ctr("tasks", "delete", "-f", id)
			}
		}
		if out, err := c.ctr("containers", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(out) {
				c.ctr("containers", "delete", id)
			}
		}
	}
	c.mu.Lock()
	for _, name := range []string{"containerd", "kube-apiserver", "etcd"} {
		if d := c.procs[name]; d != nil {
			d.end(syscall.SIGTERM, 10*time.Second)
			delete(c.procs, name)
		}
	}
	c.mu.Unlock()
	var errs []error
	if left := c.leftovers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("kubetest: processes of the cluster were left (killed now): %s", strings.Join(left, "; ")))
	}
	unmountUnder(c.dir)
	if c.dir != "" {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("kubetest: remove the cluster's directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// drainPods deletes every pod of the tests' namespace while the kubelet
// still runs, and waits (at most 30 s) until containerd runs no task:
// the kubelet then stops each pod's sandbox as it should, and the
// sandbox's shim shuts down with it. A pod deleted with no grace is gone
// from the API at once, before the kubelet has torn it down; a kubelet
// killed meanwhile left that sandbox's shim running, which no task
// deletion below ends (seen after TestPodTemplateAnswerLost, the last
// test to delete a pod).
func (c *Cluster) drainPods() {
	if c.server == "" || c.sock == "" {
		return
	}
	c.mu.Lock()
	running := c.procs["kubelet"] != nil
	c.mu.Unlock()
	if !running {
		return
	}
	c.API("DELETE", "/api/v1/namespaces/default/pods?gracePeriodSeconds=0", nil)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := c.ctr("tasks", "ls", "-q")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers kills and names the processes whose command line names the
// cluster's directory (daemons, shims) or whose environment carries a
// test pod's variable.
func (c *Cluster) leftovers() []string {
	infos, err := proc.Scan()
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	self := os.Getpid()
	for _, p := range infos {
		if p.Pid == self || !p.Alive() {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/cmdline")
		environ, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/environ")
		if bytes.Contains(cmdline, []byte(c.dir)) || bytes.Contains(environ, []byte("CONCH_TEST_POD=")) {
			left = append(left, fmt.Sprintf("pid %d: %s", p.Pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
			proc.Signal(p, unix.SIGKILL)
		}
	}
	return left
}

// unmountUnder unmounts every mount under dir, deepest first.
func unmountUnder(dir string) {
	if dir == "" {
		return
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// containerdConf is containerd's configuration: its own root, state and
// sockets; runc; the local pause image; restrict_oom_score_adj (root here
// lacks CAP_SYS_RESOURCE); no CNI (pods use the host's network).
const containerdConf = `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`

// kubeletConf is the kubelet's configuration: on 127.0.0.1, anyone may
// call it (the API server reaches it without a client certificate),
// cgroupfs without QoS cgroups on this cgroup v1 machine, no swap or
// eviction checks that a shared test machine would trip.
const kubeletConf = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: %q
podLogsDir: %q
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 2s
serializeImagePulls: false
localStorageCapacityIsolation: false
`

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: conch-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: conch-test
  context:
    cluster: conch-test
    user: admin
    namespace: default
current-context: conch-test
`
