//go:build linux

package contained_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
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
// and the owner's spill directory are not in it), and the owner's end,
// under the default sandbox, with and without a spare init
// (Options.Spare), interleaved: each spare session comes 200 ms after
// the last, the spare's refill being over by then, as between a
// server's sessions. The sandbox has a cache layer over eight cache
// directories, as a home with the usual tools gets on the defaults
// (cachelayer.Dirs), four of them used (an overlay each) and four empty
// (bound: sandbox.MountCaches), as on this project's machine. It
// reports the medians and their ratio.
//
//	go test -run '^$' -bench SessionStart -benchtime 50x ./shell/contained/
func BenchmarkSessionStart(b *testing.B) {
	dir, sandboxed := sandboxedWorkspace(b, "conch-bench-")
	home := b.TempDir()
	var caches []string
	for i, c := range []string{".cache", ".npm", "go/pkg/mod", ".config/go/telemetry", "go/pkg/sumdb", ".cargo/registry", ".cargo/git", ".m2/repository"} {
		caches = append(caches, filepath.Join(home, c))
		if err := os.MkdirAll(caches[i], 0o755); err != nil {
			b.Fatal(err)
		}
		if i < 4 {
			if err := os.WriteFile(filepath.Join(caches[i], "entry"), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	plan, err := sandbox.Policy{
		Workspace: dir, TempDirs: []string{os.TempDir()},
		Caches: caches, CacheLayer: filepath.Join(home, ".local/state/conch/cache-layer"),
		Hidden: []string{filepath.Join(home, ".local/state/conch")},
	}.Resolve()
	if err != nil {
		b.Fatal(err)
	}
	sandboxed.Sandbox = plan
	var exs []*local.Executor
	for _, spare := range []bool{false, true} {
		o := *sandboxed
		ex, err := contained.NewWith(&local.Options{Cwd: dir, SpillParent: b.TempDir()}, &o, &contained.Options{Spare: spare})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ex.Close() })
		exs = append(exs, ex)
	}
	ctx := context.Background()
	first := make([][]time.Duration, len(exs))
	end := make([][]time.Duration, len(exs))
	for i := 0; b.Loop(); i++ {
		for k, ex := range exs {
			owner := "bench-" + strconv.Itoa(i)
			spec, err := ex.Resolve(shell.Request{Command: "true", Owner: owner})
			if err != nil {
				b.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			t0 := time.Now()
			if _, err := shell.Run(ctx, ex, spec); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			ex.EndOwner(owner)
			first[k] = append(first[k], t1.Sub(t0))
			end[k] = append(end[k], time.Since(t1))
		}
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	without, with := med(first[0]), med(first[1])
	b.ReportMetric(without, "first-ms")
	b.ReportMetric(with, "spare-first-ms")
	b.ReportMetric(with/without, "ratio")
	b.ReportMetric(med(end[0]), "end-ms")
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

// BenchmarkSupervisorCost measures what the sandbox's supervisor adds to
// file-heavy work (docs/sandbox.md#costs): the same command, run in
// turn bare (bash, no conch), through a contained executor without a
// sandbox, and through one under the default sandbox (whose supervisor
// performs every write), reported as each one's time per command and
// the ratios of the sandboxed run to the two others. "opens" is 3,000
// redirections to new files, one supervised open each. "files" is an
// npm-install-like step: 2000 files in 200 directories written,
// renamed, made executable and removed; "gobuild" builds a small module
// with an empty build cache (every package's compiled output written to
// the cache), and Go's telemetry counters in the workspace (under
// ~/.config, the sandbox would deny them, and name each denial).
//
//	go test -run '^$' -bench SupervisorCost -benchtime 5x ./shell/contained/
func BenchmarkSupervisorCost(b *testing.B) {
	files := `mkdir -p pkgs && cd pkgs && for d in $(seq 200); do mkdir -p n/$d/lib; for f in $(seq 10); do echo "module.exports = $f" > n/$d/lib/f$f.js; done; done &&
for d in $(seq 200); do mv n/$d n/p$d; chmod +x n/p$d/lib/f1.js; done && cd .. && rm -r pkgs`
	gobuild := `rm -rf cache && mkdir -p mod && cd mod && printf 'module m\n\ngo 1.21\n' > go.mod &&
printf 'package main\n\nimport (\n\t"encoding/json"\n\t"fmt"\n\t"os"\n)\n\nfunc main() { json.NewEncoder(os.Stdout).Encode(fmt.Sprint(1)) }\n' > main.go &&
XDG_CONFIG_HOME=$PWD/../cfg GOCACHE=$PWD/../cache GOFLAGS=-buildvcs=false GOTOOLCHAIN=local go build -o m . && ./m`
	// One supervised open after another, the supervisor's round trip
	// and little else.
	opens := `mkdir -p o && for i in $(seq 3000); do : > o/f$i; done && rm -r o`
	for _, w := range []struct{ name, script string }{{"files", files}, {"opens", opens}, {"gobuild", gobuild}} {
		b.Run(w.name, func(b *testing.B) {
			ws := evalDir(b, b.TempDir())
			none, err := contained.New(&local.Options{Cwd: ws, SpillParent: b.TempDir(), Timeout: 10 * time.Minute, MaxTimeout: 10 * time.Minute}, initOptions())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { none.Close() })
			o := initOptions()
			o.Sandbox = defaultPlan(b, ws)
			sandboxed, err := contained.New(&local.Options{Cwd: ws, SpillParent: b.TempDir(), Timeout: 10 * time.Minute, MaxTimeout: 10 * time.Minute}, o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sandboxed.Close() })
			run := func(ex *local.Executor) time.Duration {
				spec, err := ex.Resolve(shell.Request{Command: w.script})
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				r, err := shell.Run(context.Background(), ex, spec)
				if err != nil || r.ExitCode == nil || *r.ExitCode != 0 || len(r.Notes) > 0 {
					b.Fatalf("%s: %v %+v", w.name, err, r)
				}
				return time.Since(t0)
			}
			var bare, plain, sup time.Duration
			for b.Loop() {
				t0 := time.Now()
				cmd := exec.Command("bash", "-c", w.script)
				cmd.Dir = ws
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("bare: %v\n%s", err, out)
				}
				bare += time.Since(t0)
				plain += run(none)
				sup += run(sandboxed)
			}
			b.ReportMetric(float64(bare.Milliseconds())/float64(b.N), "bare-ms/op")
			b.ReportMetric(float64(plain.Milliseconds())/float64(b.N), "contained-ms/op")
			b.ReportMetric(float64(sup.Milliseconds())/float64(b.N), "sandboxed-ms/op")
			b.ReportMetric(float64(sup)/float64(bare), "ratio-to-bare")
			b.ReportMetric(float64(sup)/float64(plain), "ratio-to-contained")
		})
	}
}

// BenchmarkTaskKillBurst: 50 owners' 20 background tasks each (1,000
// shells printing 200 lines and then sleeping, under the default
// sandbox), all killed at once with task_kill; reports the time from
// each task_kill to its task settled, p50 and p99 (target: p99 ≤ 1 s
// beside ten CPU burners), and the machine's busy CPU time from the first
// kill to the last settled. b.N is the number of bursts. It runs without
// cgroups, and with a cgroup per command where cgroup v2 is writable
// (root: conch serve's defaults there), whose kill settles a killed
// task's count without the init.
//
//	go test -run '^$' -bench TaskKillBurst -benchtime 1x ./shell/contained/
func BenchmarkTaskKillBurst(b *testing.B) {
	b.Run("no-cgroup", func(b *testing.B) { taskKillBurst(b, "") })
	b.Run("cgroup", func(b *testing.B) {
		cg := nsinit.ProbeCgroup()
		if !cg.Writable {
			b.Skip("cgroup v2 is not writable here (root, or a delegated subtree)")
		}
		taskKillBurst(b, cg.Dir)
	})
}

func taskKillBurst(b *testing.B, cgroup string) {
	const owners, perOwner = 50, 20
	ws := evalDir(b, b.TempDir())
	marker := testutil.Marker(b)
	b.Cleanup(func() { testutil.AssertNoProcesses(b, marker) }) // after the tools' closes
	initOpts := initOptions()
	initOpts.Sandbox = defaultPlan(b, ws)
	initOpts.Cgroup = cgroup
	ts := toolsWith(b, marker, ws, initOpts)
	call := func(sess tools.Session, name string, a map[string]any) tools.Result {
		raw, _ := json.Marshal(a)
		return ts.Call(context.Background(), sess, name, raw, nil)
	}
	var settles []time.Duration
	var killBusy, killSelf, killInits time.Duration
	for b.Loop() {
		type started struct {
			sess tools.Session
			id   string
		}
		var all []started
		var mu sync.Mutex
		var wg sync.WaitGroup
		for o := range owners {
			wg.Go(func() {
				sess := tools.Session{ID: "burst-" + strconv.Itoa(o), Cwd: ws}
				for range perOwner {
					// Sleeps long enough to outlast every start of the
					// burst: beside ten burners its 1,000 starts share
					// one scheduling group (the server's session) and
					// took over a minute.
					r := call(sess, tools.NameBash, map[string]any{"command": "for i in {1..200}; do echo $i; done; sleep 600", "description": "Print and wait", "run_in_background": true})
					v, ok := r.Value.(tools.BackgroundValue)
					if r.IsError || !ok {
						b.Errorf("start: %s", r.Text)
						return
					}
					mu.Lock()
					all = append(all, started{sess, v.TaskID})
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		busy0, self0, inits0 := machineBusy(b), processCPU(b, os.Getpid()), childrenCPU(b)
		for _, s := range all {
			wg.Go(func() {
				t0 := time.Now()
				r := call(s.sess, tools.NameTaskKill, map[string]any{"task_id": s.id})
				out := call(s.sess, tools.NameTaskOutput, map[string]any{"task_id": s.id, "wait": true})
				d := time.Since(t0)
				if v, ok := out.Value.(tools.TaskOutputValue); !ok || v.Status != "killed" {
					b.Errorf("%s %s: %q, then %q", s.sess.ID, s.id, r.Text, out.Text)
				}
				mu.Lock()
				settles = append(settles, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		killBusy += machineBusy(b) - busy0
		killSelf += processCPU(b, os.Getpid()) - self0
		killInits += childrenCPU(b) - inits0
		for o := range owners {
			ts.EndSession("burst-" + strconv.Itoa(o))
		}
	}
	b.StopTimer()
	bare := bareKillBurst(b, marker, owners*perOwner)
	slices.Sort(settles)
	pct := func(d []time.Duration, p int) float64 { return float64(d[(len(d)-1)*p/100].Microseconds()) / 1000 }
	b.ReportMetric(pct(settles, 50), "p50-ms")
	b.ReportMetric(pct(settles, 99), "p99-ms")
	b.ReportMetric(pct(bare, 50), "bare-p50-ms")
	b.ReportMetric(pct(bare, 99), "bare-p99-ms")
	b.ReportMetric(pct(settles, 99)/pct(bare, 99), "p99-ratio")
	b.ReportMetric(killBusy.Seconds()/float64(b.N), "kill-busy-cpu-s")
	// Of it: this process (the tools, the tasks, the executor's side of
	// every init), the inits, and the rest (the commands' own exits in the
	// kernel, the burners, the machine).
	b.ReportMetric(killSelf.Seconds()/float64(b.N), "kill-server-cpu-s")
	b.ReportMetric(killInits.Seconds()/float64(b.N), "kill-inits-cpu-s")
}

// bareKillBurst is BenchmarkTaskKillBurst's baseline, in the same run:
// n bare shells of the same command, each leading a process group of its
// own in this process's session (as the contained commands do in the
// server's: one scheduling group where the kernel's autogroups are on;
// a session each would give the baseline a group each, and so most of a
// loaded machine), all stopped at once as the burst's are (SIGTERM to
// the group) and waited for. It returns the time from each one's SIGTERM to its reaped
// exit, sorted: what the machine's own process exits cost at that load.
func bareKillBurst(b *testing.B, marker string, n int) []time.Duration {
	// Not beside the ends of the burst's sessions (their inits' exits).
	testutil.WaitFor(b, time.Minute, "the sessions' processes to go", func() bool {
		return len(testutil.Processes(marker)) == 0
	})
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		// "; :": bash would exec a last simple command in its place; a
		// task's shell waits for its sleep.
		cmd := exec.Command("bash", "-c", "for i in {1..200}; do echo $i; done; sleep 600; :")
		cmd.Env = testutil.Env(marker)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := proc.StartCmd(cmd); err != nil {
			b.Fatal(err)
		}
		cmds[i] = cmd
	}
	// Each one's sleep started, as the burst's tasks had printed.
	testutil.WaitFor(b, time.Minute, "the bare shells' sleeps", func() bool {
		return len(testutil.Processes(marker)) >= 2*n
	})
	var mu sync.Mutex
	var wg sync.WaitGroup
	var ds []time.Duration
	for _, cmd := range cmds {
		wg.Go(func() {
			t0 := time.Now()
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			// Its exit, seen in the poller: a thousand waits blocked in
			// wait4 would take a thread each, the baseline's own cost.
			proc.WaitGone([]proc.Info{{Pid: cmd.Process.Pid}}, time.Minute)
			d := time.Since(t0)
			proc.WaitCmd(cmd)
			mu.Lock()
			ds = append(ds, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(ds)
	return ds
}

// processCPU is the CPU time (user and system) process pid has used.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0 // gone
	}
	// pid (comm) state ppid … utime stime: fields 14 and 15, counted
	// after the command's closing parenthesis.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// childrenCPU is the CPU time used by this process's live children (the
// sessions' inits).
func childrenCPU(b *testing.B) time.Duration {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var sum time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:])); len(f) > 1 && f[1] == self {
			sum += processCPU(b, pid)
		}
	}
	return sum
}

// machineBusy is the CPU time this machine's processors spent busy since
// boot (every process's, the kernel's), from /proc/stat.
func machineBusy(b *testing.B) time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var ticks int64
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q", line)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
