//go:build linux

package kube_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/kubetest"
	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/kube"
	"github.com/conch-dev/conch/shell/shelltest"
)

// clientEnv makes this test binary the client process of
// TestClientKilled: it connects to the host it names and starts a
// command there, says so on stdout, and waits to be killed.
const clientEnv = "CONCH_KUBE_TEST_CLIENT"

// TestMain runs the client of TestClientKilled when asked to; else it
// runs the tests in a temporary directory of their own (kubetest.SetUp),
// ends the cluster they shared (failing the run if a process of it was
// left), and fails the run if goroutines leaked.
func TestMain(m *testing.M) {
	if v := os.Getenv(clientEnv); v != "" {
		os.Exit(client(v))
	}
	code := 0
	// The tests' temporary directory first, removed last: what the
	// other set-ups and the tests make goes there.
	removeTmp := kubetest.SetUp()
	testutil.VerifyTestMain(m, containertest.Setup(), func() {
		if err := kubetest.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}, removeTmp, func() {
		if code != 0 {
			os.Exit(code)
		}
	})
}

// client is the process TestClientKilled kills: v is the kubeconfig, the
// pod, the agent binary and the command's marker, one a line.
func client(v string) int {
	f := strings.Split(v, "\n")
	ex, err := kube.New(kube.Host{Name: "kt", Namespace: "default", Pod: f[1]},
		&kube.Options{Kubeconfig: f[0], AgentBinary: f[2], AgentArgs: []string{"--grace-ms", "500"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	spec, _ := ex.Resolve(shell.Request{Command: "echo started; sleep 1000", Env: map[string]string{testutil.MarkerEnv: f[3]}})
	p, err := ex.Launch(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		if r := p.Read(); strings.Contains(r.Stdout, "started") {
			fmt.Println("started")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {}
}

// cluster is the cluster this binary's tests share.
func cluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	kubetest.Enabled(t) // before the conch binary is built
	return kubetest.Shared(t, testutil.ConchBinary(t))
}

// pods are the pods of the test image that the tests share, by key,
// each made on first use as its options say (kubetest.PodOptions: the
// zero value is a pod of Kubernetes' defaults, /proc masked); they are
// deleted with the cluster.
var pods = map[string]string{}

func sharedPod(t *testing.T, c *kubetest.Cluster, key string, o kubetest.PodOptions) string {
	t.Helper()
	if p := pods[key]; p != "" {
		return p
	}
	name := "conch-" + key
	spec := c.PodSpec(name, "conch-test-pod-"+key, o)
	c.Pod(&keepPod{T: t}, spec)
	pods[key] = name
	return name
}

// keepPod is t without cleanups: a shared pod lives as long as the
// cluster.
type keepPod struct{ *testing.T }

func (k *keepPod) Cleanup(func()) {}

// newExec returns an executor for h in c whose commands carry a marker
// of t's; at cleanup it closes it and checks that nothing of it is left.
func newExec(t *testing.T, c *kubetest.Cluster, h kube.Host, stderr *testutil.Buffer) (remotetest.Marked, string) {
	t.Helper()
	marker := testutil.Marker(t)
	if h.Name == "" {
		h.Name = "kt"
	}
	ex, err := kube.New(h, &kube.Options{Kubeconfig: c.Kubeconfig, AgentBinary: testutil.ConchBinary(t),
		AgentArgs: []string{"--grace-ms", "500"}, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ex.Close()
		testutil.AssertNoProcesses(t, marker)
	})
	return remotetest.Marked{Executor: ex, Marker: marker}, marker
}

// agents lists the conch agents (and their inits) running in the pod
// whose variable is podMarker.
func agents(podMarker string) []string {
	var out []string
	for _, p := range testutil.Processes(podMarker) {
		if c := testutil.Cmdline(p.Pid); strings.Contains(c, "/conch-") && (strings.Contains(c, " agent") || strings.Contains(c, "init")) {
			out = append(out, fmt.Sprintf("%d %s", p.Pid, c))
		}
	}
	return out
}

// assertNoAgents fails t if an agent is left in the pod after 3 s.
func assertNoAgents(t *testing.T, podMarker string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = agents(podMarker); len(left) == 0 {
			return
		}
	}
	t.Errorf("agents left in the pod after 3 s:\n%s", strings.Join(left, "\n"))
}

// suiteEnv carries the suite's pod from the root run to its run as
// nobody: the kubeconfig, the pod whose user is nobody, the binary.
const suiteEnv = "CONCH_TEST_SUITE_KUBE"

// TestSuite runs the provider suite against a real conch agent, deployed
// into a running privileged pod through the API server's pods/exec and
// started there with the suite's settings as its flags and its default
// containment and sandbox: privileged unmasks /proc, so that each
// session gets its own PID namespace and the sandbox there. The pod
// shares this machine's temporary directory, where the suite makes its
// workdirs and spill parents, and its /usr, read only. Every subtest
// starts an agent of its own through an exec of its own. A case the
// suite runs again as nobody (testutil.AsUnprivileged) uses a second
// pod whose user is nobody (an exec runs as the container's user),
// which the root run made.
func TestSuite(t *testing.T) {
	var kubeconfig, podName, bin, podMarker string
	if v := os.Getenv(suiteEnv); v != "" && os.Geteuid() != 0 {
		f := strings.Split(v, "\n")
		if len(f) != 3 {
			t.Fatalf("%s=%q: want kubeconfig, pod and binary, one a line", suiteEnv, v)
		}
		kubeconfig, podName, bin = f[0], f[1], f[2]
	} else {
		c := cluster(t)
		ro := []string{"/usr"}
		if prefix := filepath.Dir(filepath.Dir(testutil.Python3(t))); !strings.HasPrefix(prefix, "/usr/") {
			ro = append(ro, prefix)
		}
		podName = sharedPod(t, c, "suite", suitePod(ro...))
		nobody := 65534
		o := suitePod(ro...)
		o.UID = &nobody
		nobodyPod := sharedPod(t, c, "suite-nobody", o)
		kubeconfig, bin, podMarker = c.Kubeconfig, testutil.ConchBinary(t), "conch-test-pod-suite"
		t.Cleanup(func() { assertNoAgents(t, podMarker); assertNoAgents(t, "conch-test-pod-suite-nobody") })
		os.Setenv(suiteEnv, kubeconfig+"\n"+nobodyPod+"\n"+bin)
		t.Cleanup(func() { os.Unsetenv(suiteEnv) })
	}
	stderr := new(testutil.Buffer)
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		env, marker := remotetest.AgentEnviron(c)
		ex, err := kube.New(kube.Host{Name: "k1", Namespace: "default", Pod: podName, Cwd: c.Cwd}, &kube.Options{
			Kubeconfig:  kubeconfig,
			AgentBinary: bin,
			AgentArgs:   remotetest.AgentArgs(c),
			AgentPrefix: append([]string{"env", "-i"}, env...),
			Stderr:      stderr,
			Executor:    remote.Options{Timeout: c.Timeout, MaxTimeout: c.MaxTimeout},
		})
		if err != nil {
			t.Fatalf("kube.New: %v", err)
		}
		hello, err := ex.Hello(t.Context())
		if err != nil {
			ex.Close()
			t.Fatalf("connect: %v\nagent stderr:\n%s", err, stderr.String())
		}
		// The suite holds through the agent's containment and sandbox,
		// not beside them.
		for _, want := range []string{"; containment: pid-namespace", "; sandbox: workspace-write"} {
			if !strings.Contains(hello.Enforces, want) {
				ex.Close()
				t.Fatalf("the agent in pod %s enforces %q, want %q", podName, hello.Enforces, want)
			}
		}
		return remotetest.Marked{Executor: ex, Marker: marker}
	})
}

// suitePod is the provider suite's pod: privileged, so that the agent
// contains its commands, sharing this machine's temporary directory
// (the suite's workdirs and spill parents) and readOnly.
func suitePod(readOnly ...string) kubetest.PodOptions {
	return kubetest.PodOptions{Privileged: true, ShareTmp: true, ReadOnly: readOnly}
}

// TestMaskedPod: in a pod of Kubernetes' defaults (/proc masked, no
// volume) the agent runs its commands in root's home without
// containment (pid 1 of what they see is the pod's own command, not
// the agent's init), and conch doctor --host (built with the
// Kubernetes transport) says so, naming privileged: true; containment =
// "require" is refused with the host's unreachable text; in the
// privileged pod the same doctor says pid-namespace.
func TestMaskedPod(t *testing.T) {
	c := cluster(t)
	masked := sharedPod(t, c, "masked", kubetest.PodOptions{})
	privileged := sharedPod(t, c, "suite", suitePod("/usr"))
	t.Cleanup(func() { assertNoAgents(t, "conch-test-pod-masked") })

	ex, _ := newExec(t, c, kube.Host{Namespace: "default", Pod: masked}, new(testutil.Buffer))
	r := shelltest.MustRun(t, ex, shell.Request{Command: "pwd; tr '\\0' ' ' </proc/1/cmdline; echo"})
	if want := "/root\nsleep 3600 \n"; r.Stdout.Text != want {
		t.Errorf("in the masked pod: %q, want %q: in /root, in the pod's own PID namespace", r.Stdout.Text, want)
	}

	conch := kubetest.KubeConch(t)
	doctor := func(pod, extra string) (string, int) {
		cfg := filepath.Join(t.TempDir(), "config.toml")
		os.WriteFile(cfg, []byte("[hosts.kt]\nkubernetes = \"default/"+pod+"\"\n"+extra), 0o644)
		marker := testutil.Marker(t)
		cmd := exec.Command(conch, "doctor", "--config", cfg, "--host", "kt")
		cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "KUBECONFIG="+c.Kubeconfig)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		testutil.AssertNoProcesses(t, marker)
		return string(out) + stderr.String(), code
	}
	out, code := doctor(masked, "")
	for _, want := range []string{
		"host: kt (kubernetes pod default/" + masked + ")\n",
		"cwd: /root\n",
		"containment: none (",
		"privileged: true",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("conch doctor --host kt, masked: %d\n%s\nwant it to say %q", code, out, want)
		}
	}
	out, code = doctor(masked, "containment = \"require\"\n")
	if want := "agent: none (host kt unreachable: "; code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "; the command did not run)") {
		t.Errorf("conch doctor --host kt, masked, containment require: %d\n%s\nwant it unreachable", code, out)
	}
	out, code = doctor(privileged, "")
	if want := "containment: pid-namespace\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("conch doctor --host kt, privileged: %d\n%s\nwant %q", code, out, want)
	}
}

// TestClientKilled: when the client process dies (SIGKILL), its exec
// streams close, the kubelet closes the agent's input, and the agent and
// what it ran in the pod are gone within 3 s.
func TestClientKilled(t *testing.T) {
	c := cluster(t)
	pod := sharedPod(t, c, "masked", kubetest.PodOptions{})
	marker := testutil.Marker(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), clientEnv+"="+strings.Join([]string{c.Kubeconfig, pod, testutil.ConchBinary(t), marker}, "\n"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
		t.Fatalf("the client: %q, %v", line, err)
	}
	testutil.WaitFor(t, 10*time.Second, "sleep 1000 runs in the pod", func() bool { return len(testutil.Processes(marker)) > 0 })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	testutil.AssertNoProcesses(t, marker) // within 3 s
	assertNoAgents(t, "conch-test-pod-masked")
}

// TestKubeletKilled: a SIGKILL of the kubelet ends the exec streams it
// served: the running call ends as lost with the contract's line, the
// agent and what it ran are gone within 3 s, and once the kubelet is
// back the next call starts a new agent.
func TestKubeletKilled(t *testing.T) {
	c := cluster(t)
	pod := sharedPod(t, c, "masked", kubetest.PodOptions{})
	ex, marker := newExec(t, c, kube.Host{Name: "kt", Namespace: "default", Pod: pod}, new(testutil.Buffer))
	spec, _ := ex.Resolve(shell.Request{Command: "echo started; sleep 1000"})
	p, err := ex.Launch(spec)
	if err != nil {
		t.Fatal(err)
	}
	shelltest.ReadUntil(t, p, func(r shell.ReadResult) bool { return r.Stdout == "started\n" })
	c.KillKubelet()
	restarted := false
	defer func() {
		if !restarted {
			c.RestartKubelet()
		}
	}()
	shelltest.WaitDone(t, p, 20*time.Second)
	want := remote.LostMarker("kt") + "\n"
	if r := p.Result(); !strings.HasSuffix(r.Stderr.Text, want) || p.Status() != shell.StatusKilled {
		t.Errorf("the call whose kubelet died: %s %+v, want stderr ending %q", p.Status(), r, want)
	}
	testutil.AssertNoProcesses(t, marker) // within 3 s
	assertNoAgents(t, "conch-test-pod-masked")
	restarted = true
	if err := c.RestartKubelet(); err != nil {
		t.Fatal(err)
	}
	// The restarted kubelet serves exec once it has synced the pod again.
	testutil.WaitFor(t, 30*time.Second, "a call after the kubelet came back", func() bool {
		spec, _ := ex.Resolve(shell.Request{Command: "echo again"})
		r, err := shell.Run(t.Context(), ex, spec)
		return err == nil && r.Stdout.Text == "again\n"
	})
}

// TestPodTemplate: a pod_template host makes its pod on the first
// command (not before), labelled and annotated as conch's (the host, the
// conch process), named by conch from the manifest's generateName, runs
// commands there, and deletes it when the executor closes, leaving no
// goroutine (no idle connection of its API calls) behind.
func TestPodTemplate(t *testing.T) {
	c := cluster(t)
	tmpl := filepath.Join(t.TempDir(), "pod.yaml")
	spec := c.PodSpec("", "conch-test-pod-template", kubetest.PodOptions{})
	spec["metadata"] = map[string]any{"generateName": "conch-tmpl-"}
	writeJSON(t, tmpl, spec)
	before := c.Pods(t)
	ex, err := kube.NewTemplate(kube.Host{Name: "kt", Template: tmpl}, &kube.Options{Kubeconfig: c.Kubeconfig, AgentBinary: testutil.ConchBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if got := c.Pods(t); len(got) != len(before) {
		t.Errorf("pods before the first command: %v, want %v", got, before)
	}
	start := time.Now()
	r := shelltest.MustRun(t, ex, shell.Request{Command: "echo ok"})
	t.Logf("first command on a pod_template host: %v", time.Since(start))
	if r.Stdout.Text != "ok\n" {
		t.Errorf("in the template's pod: %+v", r)
	}
	var made []string
	for _, p := range c.Pods(t) {
		if strings.HasPrefix(p, "conch-tmpl-") {
			made = append(made, p)
		}
	}
	if len(made) != 1 {
		t.Fatalf("pods made from the template: %v, want one", made)
	}
	// The template says nothing of a service account token: none is
	// mounted for the commands to reach the API server with.
	b, code, err := c.API("GET", "/api/v1/namespaces/default/pods/"+made[0], nil)
	if err != nil || code != 200 {
		t.Fatalf("get pod %s: %d %v", made[0], code, err)
	}
	var got struct {
		Metadata podMeta `json:"metadata"`
		Spec     struct {
			Automount *bool `json:"automountServiceAccountToken"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Spec.Automount == nil || *got.Spec.Automount {
		t.Errorf("pod %s: automountServiceAccountToken %v (%v), want false", made[0], got.Spec.Automount, err)
	}
	host, _ := os.Hostname()
	if m := got.Metadata; m.Labels["app.kubernetes.io/managed-by"] != "conch" || m.Annotations[kube.TemplateAnnotation] != "kt" ||
		!strings.HasPrefix(m.Annotations[kube.ServerAnnotation], host+"/") ||
		!strings.HasSuffix(m.Annotations[kube.ServerAnnotation], fmt.Sprintf("/%d/%s", os.Getpid(), startTime(t, os.Getpid()))) {
		t.Errorf("pod %s: labels %v, annotations %v: want managed-by conch, the host kt and this process", made[0], m.Labels, m.Annotations)
	}
	if len(made[0]) != len("conch-tmpl-")+8 || !slices.Equal(ex.Pods(), []string{"default/" + made[0]}) {
		t.Errorf("pod %s, the template's %v: want conch-tmpl- and 8 characters of conch's", made[0], ex.Pods())
	}
	if err := ex.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	for _, p := range c.Pods(t) {
		if p == made[0] {
			t.Errorf("pod %s is still there after Close", p)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "the template's pod's processes end", func() bool {
		return len(testutil.Processes("conch-test-pod-template")) == 0
	})
	// The API calls' connections (create, status, delete) end with the
	// host, not with the test binary.
	testutil.VerifyNoLeaks(t)
}

// TestBadPodTemplate: a template whose pod cannot become ready (its
// image is not there and may not be pulled) is the host's unreachable
// error naming the pod's status, and its pod is deleted.
func TestBadPodTemplate(t *testing.T) {
	c := cluster(t)
	tmpl := filepath.Join(t.TempDir(), "pod.yaml")
	spec := c.PodSpec("", "conch-test-pod-bad", kubetest.PodOptions{})
	spec["metadata"] = map[string]any{"generateName": "conch-bad-"}
	spec["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "localhost/no-such-image:1"
	writeJSON(t, tmpl, spec)
	ex, err := kube.NewTemplate(kube.Host{Name: "kt", Template: tmpl}, &kube.Options{Kubeconfig: c.Kubeconfig, AgentBinary: testutil.ConchBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	_, err = ex.Hello(t.Context())
	for _, want := range []string{"host kt unreachable: pod default/conch-bad-", " cannot become ready: Pending; container main waiting: ErrImageNeverPull: ", "; the command did not run"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a template whose image is missing: %v, want it to contain %q", err, want)
		}
	}
	for _, p := range c.Pods(t) {
		if strings.HasPrefix(p, "conch-bad-") {
			t.Errorf("pod %s is still there", p)
		}
	}
}

// writeJSON writes v to file as JSON (a manifest YAML reads too).
func writeJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
