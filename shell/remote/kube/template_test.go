//go:build linux

package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/conch-dev/conch/internal/kubetest"
	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/kube"
	"github.com/conch-dev/conch/shell/shelltest"
)

// podMeta is what the tests read of a pod's metadata.
type podMeta struct {
	Name        string            `json:"name"`
	UID         string            `json:"uid"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// startTime is /proc/<pid>/stat's 22nd field.
func startTime(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[19]
}

// uniqueHost is a host name of its own for each test, so that the pods
// of its template are found by their annotation whatever else runs.
func uniqueHost() string {
	var b [4]byte
	rand.Read(b[:])
	return "tpl-" + hex.EncodeToString(b[:])
}

// managedPods are the pods of namespace default that carry conch's
// label, read through the API server.
func managedPods(t *testing.T, c *kubetest.Cluster) []podMeta {
	t.Helper()
	b, code, err := c.API("GET", "/api/v1/namespaces/default/pods?labelSelector="+url.QueryEscape("app.kubernetes.io/managed-by=conch"), nil)
	if err != nil || code != 200 {
		t.Fatalf("list pods: %d %v: %s", code, err, b)
	}
	var l struct {
		Items []struct {
			Metadata podMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	var out []podMeta
	for _, it := range l.Items {
		out = append(out, it.Metadata)
	}
	return out
}

// hostPods are the names of the pods conch made for the template host
// called host, read through the API server, sorted.
func hostPods(t *testing.T, c *kubetest.Cluster, host string) []string {
	t.Helper()
	var names []string
	for _, p := range managedPods(t, c) {
		if p.Annotations[kube.TemplateAnnotation] == host {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// templateFile writes a manifest of the test image (generateName
// conch-<prefix>-, /proc masked unless o says otherwise) whose
// container's environment carries podMarker, and returns its file.
func templateFile(t *testing.T, c *kubetest.Cluster, prefix, podMarker string, o kubetest.PodOptions) string {
	t.Helper()
	spec := c.PodSpec("", podMarker, o)
	spec["metadata"] = map[string]any{"generateName": "conch-" + prefix + "-"}
	file := filepath.Join(t.TempDir(), "pod.yaml")
	writeJSON(t, file, spec)
	return file
}

// newTemplate returns a template host called host of the manifest file,
// whose commands carry a marker of t's; at cleanup it closes it, and
// checks that none of its processes and none of its pods is left.
func newTemplate(t *testing.T, c *kubetest.Cluster, host, file, podMarker string, o *kube.Options) (*kube.Template, string) {
	t.Helper()
	marker := testutil.Marker(t)
	var opts kube.Options
	if o != nil {
		opts = *o
	}
	opts.Kubeconfig, opts.AgentBinary, opts.AgentArgs = c.Kubeconfig, testutil.ConchBinary(t), []string{"--grace-ms", "500"}
	tp, err := kube.NewTemplate(kube.Host{Name: host, Template: file}, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Close(); err != nil {
			t.Errorf("close the template: %v", err)
		}
		if left := hostPods(t, c, host); len(left) > 0 {
			t.Errorf("pods left after Close: %v", left)
		}
		testutil.AssertNoProcesses(t, marker)
		testutil.WaitFor(t, 30*time.Second, "the template's pods' processes end", func() bool {
			return len(testutil.Processes(podMarker)) == 0
		})
	})
	return tp, marker
}

// TestPodTemplateSessions: a pod_template host makes nothing until a
// command comes; an owner's first command makes one pod, which its later
// commands share; another owner gets another pod, where the first one's
// files are not; ending an owner deletes its pod (gone from the API
// server when EndOwner returns) and what ran there, and leaves the
// other's; Close deletes the rest.
func TestPodTemplateSessions(t *testing.T) {
	c := cluster(t)
	host := uniqueHost()
	tp, marker := newTemplate(t, c, host, templateFile(t, c, "sess", "conch-test-pod-sessions", kubetest.PodOptions{}), "conch-test-pod-sessions", nil)
	ex := remotetest.Marked{Executor: tp, Marker: marker}
	if got := hostPods(t, c, host); len(got) != 0 {
		t.Fatalf("pods before the first command: %v", got)
	}
	run := func(owner, command string) shell.Result {
		t.Helper()
		return shelltest.MustRun(t, ex, shell.Request{Command: command, Owner: owner})
	}
	if r := run("a", "echo a > mine; cat mine"); r.Stdout.Text != "a\n" {
		t.Errorf("a's first command: %+v", r)
	}
	first := hostPods(t, c, host)
	if len(first) != 1 {
		t.Fatalf("pods after a's first command: %v, want one", first)
	}
	if r := run("a", "cat mine; sleep 1000 & echo started"); r.Stdout.Text != "a\nstarted\n" {
		t.Errorf("a's second command: %+v", r)
	}
	if got := hostPods(t, c, host); !slices.Equal(got, first) {
		t.Errorf("pods after a's second command: %v, want a's %v alone", got, first)
	}
	if r := run("b", "cat mine; sleep 1000 & echo started"); r.Stdout.Text != "started\n" || !strings.Contains(r.Stderr.Text, "mine") {
		t.Errorf("b, in a pod of its own, sees a's file: %+v", r)
	}
	both := hostPods(t, c, host)
	if len(both) != 2 {
		t.Fatalf("pods after b's first command: %v, want two", both)
	}
	testutil.WaitFor(t, 10*time.Second, "both sleeps run", func() bool { return len(testutil.Processes(marker)) == 2 })
	tp.EndOwner("a")
	if got := hostPods(t, c, host); len(got) != 1 || got[0] == first[0] {
		t.Errorf("pods after a ended: %v, want b's alone (a's was %s)", got, first[0])
	}
	if n := len(testutil.Processes(marker)); n != 1 {
		t.Errorf("after a ended: %d processes of the test, want b's sleep alone", n)
	}
	if r := run("b", "echo still"); r.Stdout.Text != "still\n" {
		t.Errorf("b after a ended: %+v", r)
	}
	// A pod deleted behind conch's back: the owner's next command gets a
	// new one.
	gone := hostPods(t, c, host)
	c.DeletePod(t, gone[0])
	// The API server forgets a pod deleted with no grace at once; its
	// containers, and the agent's exec there, end when the kubelet
	// stops them.
	testutil.WaitFor(t, 30*time.Second, "the deleted pod's processes end", func() bool {
		return len(testutil.Processes("conch-test-pod-sessions")) == 0
	})
	r := run("b", "echo anew")
	if lost := remote.LostMarker(host) + "\n"; r.Stderr.Text == lost {
		r = run("b", "echo anew") // sent before the exec saw its pod go
	}
	if r.Stdout.Text != "anew\n" {
		t.Errorf("b after its pod was deleted: %+v", r)
	}
	if got := hostPods(t, c, host); len(got) != 1 || got[0] == gone[0] {
		t.Errorf("pods after b's pod was deleted and b ran again: %v, want a new one (not %s)", got, gone[0])
	}
}

// TestPodTemplateCloseWhileStarting: Close during a first command whose
// pod never becomes ready (its readiness probe always fails) gives the
// pod up at once, not after the ready timeout: the command fails as
// unreachable, Close returns within seconds, and the pod is gone.
func TestPodTemplateCloseWhileStarting(t *testing.T) {
	c := cluster(t)
	host := uniqueHost()
	spec := c.PodSpec("", "conch-test-pod-unready", kubetest.PodOptions{})
	spec["metadata"] = map[string]any{"generateName": "conch-unready-"}
	spec["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["readinessProbe"] = map[string]any{
		"exec": map[string]any{"command": []string{"false"}}, "periodSeconds": 1}
	file := filepath.Join(t.TempDir(), "pod.yaml")
	writeJSON(t, file, spec)
	tp, _ := newTemplate(t, c, host, file, "conch-test-pod-unready", &kube.Options{ReadyTimeout: 10 * time.Minute})
	errc := make(chan error, 1)
	go func() {
		_, err := tp.Hello(context.Background())
		errc <- err
	}()
	testutil.WaitFor(t, 30*time.Second, "the pod is made", func() bool { return len(hostPods(t, c, host)) == 1 })
	start := time.Now()
	if err := tp.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Close during the pod's start took %v", d)
	}
	var ue *remote.UnreachableError
	if err := <-errc; !errors.As(err, &ue) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the first command when the host closed: %v, want it unreachable, closed", err)
	}
	if got := hostPods(t, c, host); len(got) != 0 {
		t.Errorf("pods after Close: %v", got)
	}
}

// stalePod makes a pod as a conch whose identity is server made it for
// the template host host, not ready-waited, and deletes it at t's end
// when it is still there.
func stalePod(t *testing.T, c *kubetest.Cluster, host, server string) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "conch-stale-" + hex.EncodeToString(b[:])
	spec := c.PodSpec(name, "conch-test-pod-stale", kubetest.PodOptions{})
	meta := spec["metadata"].(map[string]any)
	meta["labels"] = map[string]any{"app.kubernetes.io/managed-by": "conch"}
	meta["annotations"] = map[string]any{kube.TemplateAnnotation: host, kube.ServerAnnotation: server}
	body, _ := json.Marshal(spec)
	out, code, err := c.API("POST", "/api/v1/namespaces/default/pods", body)
	if err != nil || code != 201 {
		t.Fatalf("create pod %s: %d %v: %s", name, code, err, out)
	}
	t.Cleanup(func() {
		if _, code, _ := c.API("GET", "/api/v1/namespaces/default/pods/"+name, nil); code != 404 {
			c.DeletePod(t, name)
		}
	})
	return name
}

// TestPodTemplateStale: the first pod a template makes is preceded by
// the deletion of the pods of conch processes of this machine that no
// longer run (a pid that runs no process of that start time; an earlier
// boot of this machine: its hostname and machine id); the pods of a
// conch that runs, of another machine of the same hostname (another
// machine id), of another hostname, and those that name no conch
// process are left alone.
func TestPodTemplateStale(t *testing.T) {
	c := cluster(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "1000")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { alive.Process.Kill(); alive.Wait() }()
	hostname, _ := os.Hostname()
	machine := readLine(t, "/etc/machine-id")
	boot := readLine(t, "/proc/sys/kernel/random/boot_id")
	aliveStart := startTime(t, alive.Process.Pid)
	id := func(host, machine, boot string, pid int, start string) string {
		return fmt.Sprintf("%s/%s/%s/%d/%s", host, machine, boot, pid, start)
	}
	stale := uniqueHost()
	swept := map[string]bool{
		stalePod(t, c, stale, id(hostname, machine, boot, dead.Process.Pid, "1")):                     true, // a process that is gone
		stalePod(t, c, stale, id(hostname, machine, "0-earlier-boot", alive.Process.Pid, aliveStart)): true, // this machine, an earlier boot
	}
	kept := []string{
		stalePod(t, c, stale, id(hostname, machine, boot, alive.Process.Pid, aliveStart)),
		stalePod(t, c, stale, id(hostname, "another-machine", "0-its-boot", 1, "1")),
		stalePod(t, c, stale, id("another-host", machine, "0-its-boot", 1, "1")),
		// This boot, but no machine id or another hostname: a container on
		// this machine, whose pids are its own.
		stalePod(t, c, stale, id(hostname, "", boot, dead.Process.Pid, "1")),
		stalePod(t, c, stale, id("a-container", machine, boot, dead.Process.Pid, "1")),
		stalePod(t, c, stale, "not/an/identity"),
	}
	slices.Sort(kept)
	tp, marker := newTemplate(t, c, uniqueHost(), templateFile(t, c, "sweeper", "conch-test-pod-sweeper", kubetest.PodOptions{}), "conch-test-pod-sweeper", nil)
	if r := shelltest.MustRun(t, remotetest.Marked{Executor: tp, Marker: marker}, shell.Request{Command: "echo hi"}); r.Stdout.Text != "hi\n" {
		t.Errorf("echo hi: %+v", r)
	}
	if got := hostPods(t, c, stale); !slices.Equal(got, kept) {
		var was []string
		for p := range swept {
			was = append(was, p)
		}
		t.Errorf("pods left of the stale ones: %v, want %v (those of a live process, another machine, another host, no identity); swept should be %v", got, kept, was)
	}
	for _, p := range kept {
		c.DeletePod(t, p)
	}
	testutil.WaitFor(t, 30*time.Second, "the stale pods' processes end", func() bool {
		return len(testutil.Processes("conch-test-pod-stale")) == 0
	})
}

func readLine(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// serveConch starts `conch serve` (the binary with the Kubernetes
// transport) with the configuration file cfg and connects an MCP client;
// it returns the client and the server's process.
func serveConch(t *testing.T, c *kubetest.Cluster, marker, cfg string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(kubetest.KubeConch(t), "serve", "--config", cfg, "--grace-ms", "500")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stderr = new(testutil.Buffer)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conch-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to conch serve: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

// onHost runs command on host through the bash tool and returns its text.
func onHost(t *testing.T, cs *mcp.ClientSession, host, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		"command": command, "description": "Run a test command", "host": host}})
	if err != nil {
		t.Fatalf("bash on %s: %v", host, err)
	}
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// TestPodTemplateServerKilled: through the conch binary, a server killed
// with SIGKILL deletes nothing and its pod would run on; the next conch
// (conch doctor --host, which makes a pod of its own) deletes it before
// it makes its own, and leaves alone the pod of a conch that still runs,
// whose session goes on in it. The session's end deletes that one.
func TestPodTemplateServerKilled(t *testing.T) {
	c := cluster(t)
	host := uniqueHost()
	const podMarker = "conch-test-pod-killed"
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[hosts."+host+"]\npod_template = \""+templateFile(t, c, "killed", podMarker, kubetest.PodOptions{})+"\"\n"), 0o644)
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)

	killed, cmd := serveConch(t, c, marker, cfg)
	if got := onHost(t, killed, host, "echo first"); got != "first\n" {
		t.Fatalf("on %s: %q", host, got)
	}
	left := hostPods(t, c, host)
	if len(left) != 1 {
		t.Fatalf("pods after the first server's command: %v, want one", left)
	}
	t.Cleanup(func() { // should the test fail
		if slices.Contains(hostPods(t, c, host), left[0]) {
			c.DeletePod(t, left[0])
		}
	})
	live, _ := serveConch(t, c, marker, cfg)
	if got := onHost(t, live, host, "echo live > mine; cat mine"); got != "live\n" {
		t.Fatalf("on %s through the second server: %q", host, got)
	}
	both := hostPods(t, c, host)
	if len(both) != 2 {
		t.Fatalf("pods with two servers: %v, want two", both)
	}
	livePod := both[0]
	if livePod == left[0] {
		livePod = both[1]
	}
	cmd.Process.Signal(syscall.SIGKILL)
	killed.Close() // waits for the server's process, which the transport owns
	if got := hostPods(t, c, host); !slices.Equal(got, both) {
		t.Fatalf("pods after the first server was killed: %v, want %v left", got, both)
	}

	doctor := exec.Command(kubetest.KubeConch(t), "doctor", "--config", cfg, "--host", host)
	doctor.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "KUBECONFIG="+c.Kubeconfig)
	if out, err := doctor.CombinedOutput(); err != nil || !strings.Contains(string(out), "host: "+host+" (kubernetes pod template ") {
		t.Errorf("conch doctor --host %s: %v\n%s", host, err, out)
	}
	if got := hostPods(t, c, host); !slices.Equal(got, []string{livePod}) {
		t.Errorf("pods after the next conch ran: %v, want the live server's %s alone (the killed server's %s deleted)", got, livePod, left[0])
	}
	if got := onHost(t, live, host, "cat mine"); got != "live\n" {
		t.Errorf("the live server's session after the sweep: %q", got)
	}
	live.Close()
	testutil.WaitFor(t, 30*time.Second, "the live server's pod is deleted at its session's end", func() bool { return len(hostPods(t, c, host)) == 0 })
	testutil.WaitFor(t, 30*time.Second, "the pods' processes end", func() bool { return len(testutil.Processes(podMarker)) == 0 })
}

// TestPodTemplateAnswerLost: a pod whose creation's answer never came
// back (a proxy in front of the API server forwards the POST, then cuts
// the connection instead of answering) is known to conch by the name it
// chose, and deleted: the first command fails as unreachable, and the
// pod the API server made is gone.
func TestPodTemplateAnswerLost(t *testing.T) {
	c := cluster(t)
	config, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(config)
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Transport{TLSClientConfig: tlsConfig}
	defer upstream.CloseIdleConnections()
	target, _ := url.Parse(config.Host)
	var (
		mu      sync.Mutex
		created []string // the pods the API server made through the proxy
	)
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: upstream,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method != http.MethodPost || !strings.HasSuffix(resp.Request.URL.Path, "/pods") {
				return nil
			}
			var p struct {
				Metadata podMeta `json:"metadata"`
			}
			json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
			mu.Lock()
			created = append(created, p.Metadata.Name)
			mu.Unlock()
			return errAnswerLost
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errAnswerLost) {
				panic(http.ErrAbortHandler) // the connection is cut, no answer
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewUnstartedServer(proxy)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the aborts are the test's
	srv.StartTLS()
	defer srv.Close()
	kc, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = srv.URL
		cl.CertificateAuthorityData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	const podMarker = "conch-test-pod-lost"
	host := uniqueHost()
	tp, err := kube.NewTemplate(kube.Host{Name: host, Template: templateFile(t, c, "lost", podMarker, kubetest.PodOptions{})},
		&kube.Options{Kubeconfig: kubeconfig, AgentBinary: testutil.ConchBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tp.Hello(t.Context())
	var ue *remote.UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "create a pod from ") {
		t.Errorf("a first command whose pod's creation got no answer: %v, want it unreachable", err)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	mu.Lock()
	made := slices.Clone(created)
	mu.Unlock()
	if len(made) != 1 || !strings.HasPrefix(made[0], "conch-lost-") {
		t.Fatalf("pods the API server made through the proxy: %q, want one", made)
	}
	if _, code, err := c.API("GET", "/api/v1/namespaces/default/pods/"+made[0], nil); err != nil || code != 404 {
		t.Errorf("pod %s, whose creation's answer was lost: %d %v, want it deleted (404)", made[0], code, err)
		c.DeletePod(t, made[0])
	}
	testutil.WaitFor(t, 30*time.Second, "the pod's processes end", func() bool { return len(testutil.Processes(podMarker)) == 0 })
}

var errAnswerLost = errors.New("the answer is lost")
