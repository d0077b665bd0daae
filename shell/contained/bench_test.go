//go:build linux

package contained_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
	"github.com/conch-dev/conch/tools"
)

// BenchmarkRunTrueVsBare compares Run("true") of a contained executor with
// a bare spawn of the same command (target: at most 1.25): without a
// sandbox, and under conch's default one (workspace-write, network on).
//
//	go test -run '^$' -bench RunTrueVsBare -benchtime 2000x ./shell/contained/
func BenchmarkRunTrueVsBare(b *testing.B) {
	for _, v := range []struct {
		name    string
		sandbox bool
	}{{"none", false}, {"default", true}} {
		b.Run(v.name, func(b *testing.B) {
			o := initOptions()
			if v.sandbox {
				o.Sandbox = defaultPlan(b, b.TempDir())
			}
			ex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { ex.Close() })
			shelltest.BenchRunVsBare(b, ex)
		})
	}
}

// defaultPlan is conch's default sandbox for workspace ws: workspace-write
// with the network on, the temp dirs writable and the cache dir under a
// cache layer.
func defaultPlan(tb testing.TB, ws string) *sandbox.Plan {
	tb.Helper()
	p := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Network: sandbox.NetworkOn, Workspace: ws, TempDirs: []string{os.TempDir(), "/tmp"}}
	if cache, err := os.UserCacheDir(); err == nil {
		state := tb.TempDir()
		p.Caches, p.CacheLayer, p.Hidden = []string{cache}, filepath.Join(state, "cache-layer"), []string{state}
	}
	plan, err := p.Resolve()
	if err != nil {
		tb.Fatal(err)
	}
	return plan
}

// BenchmarkTaskMemory starts 200 background tasks (`sleep`) through the
// tools over a contained executor under the default sandbox, and reports
// what each costs beyond its own process (target: at most 1 MiB): the
// server's heap after a GC ("server-KiB/task") and the init's resident
// memory ("init-KiB/task"), each grown while the tasks run, divided by
// their number.
//
//	go test -run '^$' -bench TaskMemory -benchtime 1x ./shell/contained/
func BenchmarkTaskMemory(b *testing.B) {
	const n = 200
	for b.Loop() {
		marker := testutil.Marker(b)
		ws := evalDir(b, b.TempDir())
		ts := sandboxedTools(b, marker, ws, defaultPlan(b, ws))
		sess := tools.Session{ID: "s", Cwd: ws}
		call := func(name string, args map[string]any) tools.Result {
			raw, _ := json.Marshal(args)
			r := ts.Call(b.Context(), sess, name, raw, nil)
			if r.IsError {
				b.Fatalf("%s: %s", name, r.Text)
			}
			return r
		}
		call("bash", map[string]any{"command": "true", "description": "Start the init"})
		initPid := childPid(b)
		heap0, init0 := heapInuse(), rss(b, initPid)
		for i := range n {
			call("bash", map[string]any{"command": "sleep " + strconv.Itoa(3000+i), "description": "Sleep", "run_in_background": true})
		}
		testutil.WaitFor(b, 30*time.Second, "the tasks to run", func() bool { return len(testutil.Processes(marker)) >= n })
		heap1, init1 := heapInuse(), rss(b, initPid)
		b.ReportMetric(float64(heap1-heap0)/n/1024, "server-KiB/task")
		b.ReportMetric(float64(init1-init0)/n/1024, "init-KiB/task")
		b.ReportMetric(float64(heap1-heap0+init1-init0)/n/1024, "KiB/task")
	}
}

func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// childPid is the pid of this process's child that runs its binary: the
// init of the one executor alive.
func childPid(tb testing.TB) int {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if exe, _ := os.Readlink(d + "/exe"); len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) && exe == self {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	tb.Fatal("no init among this process's children")
	return 0
}

// rss is the resident memory of process pid (VmRSS), in bytes.
func rss(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// BenchmarkSessionStart measures a session's first command, Run("true")
// by a new owner, which starts the owner's init (New's own first init
// and the owner's spill directory are not in it), and the owner's end.
//
//	go test -run '^$' -bench SessionStart -benchtime 200x ./shell/contained/
func BenchmarkSessionStart(b *testing.B) {
	ex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, initOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	ctx := context.Background()
	var first, end time.Duration
	for i := 0; b.Loop(); i++ {
		owner := "bench-" + strconv.Itoa(i)
		spec, err := ex.Resolve(shell.Request{Command: "true", Owner: owner})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := shell.Run(ctx, ex, spec); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ex.EndOwner(owner)
		first += t1.Sub(t0)
		end += time.Since(t1)
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "first-ns/op")
	b.ReportMetric(float64(end.Nanoseconds())/float64(b.N), "end-ns/op")
}

// BenchmarkTerminalVsLocal compares a terminal running `true`, from
// StartTerminal until it is done (the program exited and its terminal
// was released), through a contained executor whose owner's init is
// already up and through the local provider, interleaved, and reports
// each one's median and their ratio ("contained/local").
//
//	go test -run '^$' -bench TerminalVsLocal -benchtime 200x ./shell/contained/
func BenchmarkTerminalVsLocal(b *testing.B) {
	cex, err := contained.New(&local.Options{SpillParent: b.TempDir()}, initOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cex.Close() })
	lex, err := local.New(&local.Options{SpillParent: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lex.Close() })
	run := func(ex *local.Executor) time.Duration {
		spec, err := ex.Resolve(shell.Request{Command: "true", Owner: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		tm, err := ex.StartTerminal(spec)
		if err != nil {
			b.Fatal(err)
		}
		<-tm.Done()
		return time.Since(t0)
	}
	run(cex) // starts the owner's init
	var c, l []time.Duration
	for b.Loop() {
		c = append(c, run(cex))
		l = append(l, run(lex))
	}
	slices.Sort(c)
	slices.Sort(l)
	mc, ml := c[len(c)/2], l[len(l)/2]
	b.ReportMetric(float64(mc.Microseconds())/1000, "contained-ms")
	b.ReportMetric(float64(ml.Microseconds())/1000, "local-ms")
	b.ReportMetric(float64(mc)/float64(ml), "contained/local")
}
