//go:build linux

package nsinit_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// The benchmark compares a spawn through the init with a bare exec of the
// same command in the same run, interleaved, so a noisy machine does not
// lie:
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/nsinit/

// BenchmarkSpawnTrueVsBare alternates `bash -c true` spawned and waited
// for through the init with a bare exec.Command("bash", "-c",
// "true").Run(), and reports both and the ratio of their medians.
func BenchmarkSpawnTrueVsBare(b *testing.B) {
	benchSpawn(b, initOptions())
}

// BenchmarkSpawnTrueVsBareCgroup is BenchmarkSpawnTrueVsBare with a
// cgroup per command (made, entered at the fork, removed), where cgroup
// v2 is writable.
func BenchmarkSpawnTrueVsBareCgroup(b *testing.B) {
	cg := nsinit.Probe().Cgroup
	if !cg.Writable {
		b.Skipf("cgroup v2 is not writable here (%+v)", cg)
	}
	o := initOptions()
	o.Cgroup = cg.Dir
	benchSpawn(b, o)
}

// BenchmarkSpawnTrueVsBareSandbox is BenchmarkSpawnTrueVsBare under a
// workspace-write sandbox with the network off: the init applied it once,
// so a command should cost what it costs without.
func BenchmarkSpawnTrueVsBareSandbox(b *testing.B) {
	o := initOptions()
	o.Sandbox = benchPlan(b, sandbox.NetworkOff)
	benchSpawn(b, o)
}

func benchPlan(b *testing.B, network sandbox.Network) *sandbox.Plan {
	plan, err := sandbox.Policy{Network: network, Workspace: b.TempDir(), TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	return plan
}

// cachePlan is benchPlan with a cache layer over n cache directories (conch
// covers 7 on this machine: ~/.cache, ~/.npm, Go's two, cargo's two,
// Maven's).
func cachePlan(b *testing.B, n int) *sandbox.Plan {
	state := b.TempDir()
	p := sandbox.Policy{Workspace: b.TempDir(), TempDirs: []string{"/tmp"}, CacheLayer: filepath.Join(state, "cache-layer"), Hidden: []string{state}}
	for range n {
		p.Caches = append(p.Caches, b.TempDir())
	}
	plan, err := p.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	return plan
}

// BenchmarkStartSandbox alternates starting and closing an init without a
// sandbox, with a workspace-write sandbox, with the network off too (a
// new network namespace), and with a cache layer over 7 directories, and
// reports each median (start, and close with the layer's commit).
func BenchmarkStartSandbox(b *testing.B) {
	variants := []struct {
		name  string
		plan  *sandbox.Plan
		spare bool
	}{{"bare", nil, false}, {"sandbox", benchPlan(b, sandbox.NetworkOn), false}, {"sandbox-spare", benchPlan(b, sandbox.NetworkOn), true},
		{"netoff", benchPlan(b, sandbox.NetworkOff), false}, {"caches7", cachePlan(b, 7), false}}
	times := make([][]time.Duration, len(variants))
	closes := make([][]time.Duration, len(variants))
	for b.Loop() {
		for k, v := range variants {
			o := initOptions()
			o.Sandbox = v.plan
			if v.spare {
				// Started ahead, as a server starts the next session's
				// init (docs/containment.md#spare-inits): by the time a
				// session comes, its runtime is up.
				var err error
				if o.Spare, err = nsinit.StartSpare(o); err != nil {
					b.Fatal(err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			t0 := time.Now()
			in, err := nsinit.Start(o)
			if err != nil {
				b.Fatal(err)
			}
			times[k] = append(times[k], time.Since(t0))
			t1 := time.Now()
			in.Close()
			closes[k] = append(closes[k], time.Since(t1))
		}
	}
	for k, v := range variants {
		b.ReportMetric(float64(median(times[k]).Microseconds()), v.name+"-start-us")
		b.ReportMetric(float64(median(closes[k]).Microseconds()), v.name+"-close-us")
	}
}

func benchSpawn(b *testing.B, o *nsinit.Options) {
	in, err := nsinit.Start(o)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	cmd := nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", "true"}, Env: os.Environ(), Dir: "/tmp", Stdin: null, Stdout: null, Stderr: null}
	viaInit := make([]time.Duration, 0, b.N)
	bare := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		ch, err := in.Spawn(cmd)
		if err != nil {
			b.Fatal(err)
		}
		if ws, err := ch.Wait(); err != nil || ws.ExitStatus() != 0 {
			b.Fatalf("status %v, %v", ws, err)
		}
		ch.Release()
		t1 := time.Now()
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		viaInit = append(viaInit, t1.Sub(t0))
		bare = append(bare, t2.Sub(t1))
	}
	mi, mb := median(viaInit), median(bare)
	b.ReportMetric(float64(mi.Nanoseconds()), "init-ns/op")
	b.ReportMetric(float64(mb.Nanoseconds()), "bare-ns/op")
	b.ReportMetric(float64(mi)/float64(mb), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestInitMemory: a running background command costs the init well under
// 1 MiB of resident memory.
func TestInitMemory(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	// Settle the runtime with a first command.
	run(t, in, marker, "true")
	before := rssKiB(t, in.Pid())
	const n = 100
	var children []*nsinit.Child
	for range n {
		ch, err := in.Spawn(nsinitCommand(marker, "exec sleep 600", nil, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, ch)
	}
	testutil.WaitFor(t, 10*time.Second, "the sleeps", func() bool { return len(testutil.Processes(marker)) == n })
	after := rssKiB(t, in.Pid())
	perTask := float64(after-before) / n
	t.Logf("init resident memory: %d KiB idle, %d KiB with %d commands running: %.1f KiB per command", before, after, n, perTask)
	if perTask > 1024 {
		t.Errorf("%.1f KiB per running command, want at most 1 MiB", perTask)
	}
	for _, ch := range children {
		ch.Terminate(time.Second)
		wait(t, ch)
		ch.Release()
	}
}

// rssKiB reads VmRSS of pid.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}
