//go:build linux

package container_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/containertest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote/container"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime 200x ./shell/remote/container/
//
// Each benchmark measures conch and its baseline in the same run,
// interleaved, and reports the ratio.

func runB(b *testing.B, ex shell.Executor, cmd string) shell.Result {
	spec, err := ex.Resolve(shell.Request{Command: cmd})
	if err != nil {
		b.Fatal(err)
	}
	r, err := shell.Run(context.Background(), ex, spec)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkEchoWarm: `echo hi` through a warm agent in a podman container
// whose /proc is unmasked (each command in its session's PID namespace,
// under workspace-write), against the local provider and against
// `podman exec` of the same command.
func BenchmarkEchoWarm(b *testing.B) {
	engine := containertest.Podman(b)
	bin := testutil.ConchBinary(b)
	ctr := containertest.Start(b, engine, containertest.Image(b, engine, bin), "--security-opt", "unmask=/proc/*")
	ex, err := container.New(container.Host{Name: "box", Engine: "podman", Container: ctr}, &container.Options{AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer ex.Close()
	t0 := time.Now()
	if _, err := ex.Hello(b.Context()); err != nil {
		b.Fatal(err)
	}
	connect := time.Since(t0)
	loc, err := local.New(&local.Options{SpillParent: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer loc.Close()
	runB(b, ex, "true")
	var rem, lo, pe []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		runB(b, ex, "echo hi")
		t1 := time.Now()
		runB(b, loc, "echo hi")
		t2 := time.Now()
		if err := exec.Command(engine, "exec", ctr, "sh", "-c", "echo hi").Run(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		rem, lo, pe = append(rem, t1.Sub(t0)), append(lo, t2.Sub(t1)), append(pe, t3.Sub(t2))
	}
	b.StopTimer()
	r, l, p := p50(rem), p50(lo), p50(pe)
	b.ReportMetric(float64(r.Microseconds()), "podman-agent-p50-µs")
	b.ReportMetric(float64(l.Microseconds()), "local-p50-µs")
	b.ReportMetric(float64(p.Microseconds()), "podman-exec-p50-µs")
	b.ReportMetric(float64(r)/float64(l), "agent/local")
	b.ReportMetric(float64(r)/float64(p), "agent/podman-exec")
	b.ReportMetric(float64(connect.Milliseconds()), "first-connect-with-upload-ms")
}

// BenchmarkTemplateFirstCommand: a session's first command on a template
// host (a podman container of the test image started, the probe, the
// upload of the agent, its start and hello, then `echo hi`), each
// iteration a new owner, against its floor: `podman run -d` of the same
// image and `podman exec … sh -c 'echo hi'` in it. Also the removal of
// the owner's container when it ends (EndOwner).
//
//	go test -run '^$' -bench TemplateFirst -benchtime 10x ./shell/remote/container/
func BenchmarkTemplateFirstCommand(b *testing.B) {
	engine := containertest.Podman(b)
	bin := testutil.ConchBinary(b)
	img := containertest.Image(b, engine, bin)
	tp, err := container.NewTemplate(container.Host{Name: "bench", Engine: "podman", Image: img}, &container.Options{AgentBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	defer tp.Close()
	var first, floor, end []time.Duration
	b.ResetTimer()
	for i := range b.N {
		owner := fmt.Sprint("s", i)
		t0 := time.Now()
		spec, _ := tp.Resolve(shell.Request{Command: "echo hi", Owner: owner})
		if r, err := shell.Run(context.Background(), tp, spec); err != nil || r.Stdout.Text != "hi\n" {
			b.Fatal(r, err)
		}
		t1 := time.Now()
		tp.EndOwner(owner)
		t2 := time.Now()
		name := fmt.Sprint("conch-bench-floor-", i)
		if _, err := containertest.Output(engine, nil, "run", "-d", "--rm", "--name", name, "--entrypoint", "sleep", img, "1000"); err != nil {
			b.Fatal(err)
		}
		if err := exec.Command(engine, "exec", name, "sh", "-c", "echo hi").Run(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		containertest.Remove(engine, name)
		first, end, floor = append(first, t1.Sub(t0)), append(end, t2.Sub(t1)), append(floor, t3.Sub(t2))
	}
	b.StopTimer()
	f, e, fl := p50(first), p50(end), p50(floor)
	b.ReportMetric(float64(f.Milliseconds()), "first-command-p50-ms")
	b.ReportMetric(float64(fl.Milliseconds()), "podman-run+exec-p50-ms")
	b.ReportMetric(float64(f)/float64(fl), "first/floor")
	b.ReportMetric(float64(e.Milliseconds()), "end-owner-p50-ms")
}

// BenchmarkEchoWarmTemplate: `echo hi` through a warm agent in a template
// container, of docker (where the tests can start dockerd) and podman,
// against a bare spawn of `bash -c 'echo hi'` in the same run, and for
// podman against the local provider too. The docker run has no local
// provider: it makes this process a child subreaper, and the containerd
// shims of the tests' own dockerd (a descendant of this process) then
// die within seconds (a conch server is no ancestor of the engine's
// daemon).
//
//	go test -run '^$' -bench EchoWarmTemplate -benchtime 50x ./shell/remote/container/
func BenchmarkEchoWarmTemplate(b *testing.B) {
	bin := testutil.ConchBinary(b)
	for _, eng := range []string{"docker", "podman"} {
		b.Run(eng, func(b *testing.B) {
			var engine string
			if eng == "podman" {
				engine = containertest.Podman(b)
			} else {
				engine = containertest.Docker(b)
			}
			img := containertest.Image(b, engine, bin)
			tp, err := container.NewTemplate(container.Host{Name: "bench", Engine: eng, Image: img},
				&container.Options{EngineBinary: engine, AgentBinary: bin, RunArgs: []string{"--network", "none"}})
			if err != nil {
				b.Fatal(err)
			}
			defer tp.Close()
			runB(b, tp, "true")
			var loc shell.Executor
			if eng == "podman" {
				l, err := local.New(&local.Options{SpillParent: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				loc = l
			}
			var rem, lo, bare []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				runB(b, tp, "echo hi")
				t1 := time.Now()
				if err := exec.Command("bash", "-c", "echo hi").Run(); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				rem, bare = append(rem, t1.Sub(t0)), append(bare, t2.Sub(t1))
				if loc != nil {
					runB(b, loc, "echo hi")
					lo = append(lo, time.Since(t2))
				}
			}
			b.StopTimer()
			r, bs := p50(rem), p50(bare)
			b.ReportMetric(float64(r.Microseconds()), "template-p50-µs")
			b.ReportMetric(float64(bs.Microseconds()), "bare-p50-µs")
			b.ReportMetric(float64(r)/float64(bs), "template/bare")
			if loc != nil {
				l := p50(lo)
				b.ReportMetric(float64(l.Microseconds()), "local-p50-µs")
				b.ReportMetric(float64(r)/float64(l), "template/local")
			}
		})
	}
}
