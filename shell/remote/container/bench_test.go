//go:build linux

package container_test

import (
	"context"
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
