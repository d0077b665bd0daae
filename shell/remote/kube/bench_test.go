//go:build linux

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/kubetest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/container"
	"github.com/conch-dev/conch/shell/shelltest"
	"k8s.io/client-go/tools/remotecommand"
)

// Run them against the tests' cluster (CONCH_KUBE_TESTS=1), in one run so
// that their figures share the machine's load:
//
//	CONCH_KUBE_TESTS=1 go test -run '^$' -bench . -benchtime 20x ./shell/remote/kube/
//
// Each reports the load average of the minute it ended in (load1). The
// comparison with the local provider comes last: the local provider
// makes this process a child subreaper, and the shims of pods started
// after it would be re-parented to it.

// benchPod makes a pod of the test image for b, ready, deleted at b's
// end.
func benchPod(b *testing.B, c *kubetest.Cluster, name string, o kubetest.PodOptions) string {
	return c.Pod(b, c.PodSpec(name, "conch-bench-pod-"+name, o))
}

// BenchmarkUpload: the upload of the conch that has the Kubernetes
// transport (the binary such a conch deploys: itself) into a pod over a
// pods/exec's stdin (to a temporary file, its sha256 checked, renamed
// into place), the binary removed before each; against a pods/exec (over
// SPDY) of `wc -c` of the same bytes, its count checked.
func BenchmarkUpload(b *testing.B) {
	c := kubetest.Shared(b, testutil.ConchBinary(b))
	bin := kubetest.KubeConch(b)
	pod := benchPod(b, c, "bench-upload", kubetest.PodOptions{})
	d, err := NewDialer(Host{Name: "kb", Namespace: "default", Pod: pod}, &Options{Kubeconfig: c.Kubeconfig, AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	fi, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	size := fi.Size()
	dep, err := remote.Probe(b.Context(), "kb", d.run, d.binHash)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	p := shelltest.P50s(b, func() error {
		_, err := d.run(b.Context(), "rm -f "+remote.ShellQuote(dep.Path), nil)
		if err == nil {
			err = dep.Upload(b.Context(), d.run, bin, d.binHash)
		}
		return err
	}, func() error {
		f, err := os.Open(bin)
		if err != nil {
			return err
		}
		defer f.Close()
		// Over SPDY: through the API server's WebSocket translation, a
		// command that exits the moment its input ends loses its exit
		// status about one time in two (docs/remote.md#kubernetes). The
		// count says that every byte arrived.
		ex, err := remotecommand.NewSPDYExecutor(d.config, http.MethodPost, d.execURL([]string{"wc", "-c"}))
		if err != nil {
			return err
		}
		var out strings.Builder
		if err := ex.StreamWithContext(b.Context(), remotecommand.StreamOptions{Stdin: f, Stdout: &out, Stderr: io.Discard}); err != nil {
			return err
		}
		if got, want := strings.TrimSpace(out.String()), fmt.Sprint(size); got != want {
			return fmt.Errorf("wc -c in the pod: %q bytes, want %s", got, want)
		}
		return nil
	})
	b.StopTimer()
	b.ReportMetric(float64(p[0].Milliseconds()), "upload-p50-ms")
	b.ReportMetric(float64(p[1].Milliseconds()), "exec-wc-p50-ms")
	b.ReportMetric(float64(p[0])/float64(p[1]), "upload/wc")
	b.ReportMetric(float64(fi.Size())/1e6, "binary-MB")
	b.ReportMetric(shelltest.LoadAverage(), "load1")
}

// BenchmarkPodTemplateFirstCommand: the first command of a pod_template
// host (the pod created from the template, ready, the probe, the upload
// of the conch that has the Kubernetes transport, the agent's start and
// hello, then `echo hi`), each iteration a new host whose Close deletes
// its pod; against its floor: a pod of the same manifest created through
// the API and polled until ready, then a pods/exec of `echo hi` in it.
func BenchmarkPodTemplateFirstCommand(b *testing.B) {
	c := kubetest.Shared(b, testutil.ConchBinary(b))
	bin := kubetest.KubeConch(b)
	spec := c.PodSpec("", "conch-bench-pod-template", kubetest.PodOptions{Privileged: true})
	spec["metadata"] = map[string]any{"generateName": "conch-bench-"}
	tmpl := writeManifest(b, spec)
	var first, closing []time.Duration
	n := 0
	b.ResetTimer()
	p := shelltest.P50s(b, func() error {
		ex, err := NewTemplate(Host{Name: "kb", Template: tmpl}, &Options{Kubeconfig: c.Kubeconfig, AgentBinary: bin})
		if err != nil {
			return err
		}
		t0 := time.Now()
		err = shelltest.Echo(ex)()
		t1 := time.Now()
		if cerr := ex.Close(); err == nil {
			err = cerr
		}
		first, closing = append(first, t1.Sub(t0)), append(closing, time.Since(t1))
		return err
	}, func() error {
		n++
		name := fmt.Sprint("conch-bench-floor-", n)
		s := c.PodSpec(name, "conch-bench-pod-floor", kubetest.PodOptions{Privileged: true})
		c.Pod(b, s)
		defer c.DeletePod(b, name)
		d, err := NewDialer(Host{Name: "kb", Namespace: "default", Pod: name}, &Options{Kubeconfig: c.Kubeconfig, AgentBinary: bin})
		if err != nil {
			return err
		}
		defer d.Close()
		out, err := d.run(context.Background(), "echo hi", nil)
		if err == nil && out != "hi\n" {
			err = fmt.Errorf("echo hi: %q", out)
		}
		return err
	})
	b.StopTimer()
	f, cl := p50(first), p50(closing)
	b.ReportMetric(float64(f.Milliseconds()), "first-command-p50-ms")
	b.ReportMetric(float64(cl.Milliseconds()), "close-p50-ms")
	b.ReportMetric(float64(p[1].Milliseconds()), "create+ready+exec-p50-ms")
	b.ReportMetric(float64(f)/float64(p[1]), "first/floor")
	b.ReportMetric(shelltest.LoadAverage(), "load1")
}

// BenchmarkEchoWarm: `echo hi` through a warm agent in a privileged pod
// (each command in its session's PID namespace, under workspace-write),
// against the local provider and a warm agent in a podman container that
// unmasks /proc (contained alike), interleaved.
func BenchmarkEchoWarm(b *testing.B) {
	c := kubetest.Shared(b, testutil.ConchBinary(b))
	bin := testutil.ConchBinary(b)
	pod := benchPod(b, c, "bench-echo", kubetest.PodOptions{Privileged: true})
	kex, err := New(Host{Name: "kb", Namespace: "default", Pod: pod}, &Options{Kubeconfig: c.Kubeconfig, AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer kex.Close()
	engine := containertest.Podman(b)
	ctr := containertest.Start(b, engine, c.Image, "--security-opt", "unmask=/proc/*")
	pex, err := container.New(container.Host{Name: "box", Engine: "podman", Container: ctr}, &container.Options{AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer pex.Close()
	// Both agents contain their commands: pid 1 of what a command sees is
	// the agent's init.
	for _, ex := range []shell.Executor{kex, pex} {
		spec, _ := ex.Resolve(shell.Request{Command: "tr '\\0' ' ' </proc/1/cmdline"})
		if r, err := shell.Run(b.Context(), ex, spec); err != nil || !strings.Contains(r.Stdout.Text, "/conch-") {
			b.Fatalf("pid 1 of a command: %+v %v, want the agent's init", r, err)
		}
	}
	loc, err := local.New(&local.Options{SpillParent: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer loc.Close()
	b.ResetTimer()
	p := shelltest.P50s(b, shelltest.Echo(kex), shelltest.Echo(loc), shelltest.Echo(pex))
	b.StopTimer()
	b.ReportMetric(float64(p[0].Microseconds()), "kube-p50-µs")
	b.ReportMetric(float64(p[1].Microseconds()), "local-p50-µs")
	b.ReportMetric(float64(p[2].Microseconds()), "podman-p50-µs")
	b.ReportMetric(float64(p[0])/float64(p[1]), "kube/local")
	b.ReportMetric(float64(p[0])/float64(p[2]), "kube/podman")
	b.ReportMetric(shelltest.LoadAverage(), "load1")
}

func writeManifest(b *testing.B, spec map[string]any) string {
	f := b.TempDir() + "/pod.json"
	j, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(f, j, 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return s[len(s)/2]
}
