//go:build linux

package tools_test

// Benchmarks of the tool layer. They start real processes, so they run
// only when asked:
//
//	go test -run '^$' -bench . -benchtime 2000x ./tools/
//
// BenchmarkForegroundOverhead is the one to read for the cost of the tool
// layer: it alternates a tool call and a bare executor run of `true` in
// one loop, so both see the same machine, and reports their ratio
// ("tool/executor", target <= 1.05). BenchmarkRulesOverhead does the same
// for the bash tool with 200 rules against none ("rules/none", target
// <= 1.05). BenchmarkTaskTools keeps 1,000 live
// background tasks across 100 sessions and reports the p99 latency of
// task_output and task_list (target < 1 ms each).

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/tools"
)

var trueArgs = json.RawMessage(`{"command":"true","description":"Do nothing"}`)

// BenchmarkForegroundTrue is a bash tool call of `true`.
func BenchmarkForegroundTrue(b *testing.B) {
	e := newEnv(b, envOpts{})
	ctx := context.Background()
	for b.Loop() {
		if r := e.ts.Call(ctx, e.sess, tools.NameBash, trueArgs, nil); r.Text != "(no output)" {
			b.Fatal(r.Text)
		}
	}
}

// BenchmarkExecutorTrue is the same command through the executor alone.
func BenchmarkExecutorTrue(b *testing.B) {
	e := newEnv(b, envOpts{})
	ctx := context.Background()
	for b.Loop() {
		executorTrue(b, ctx, e)
	}
}

func executorTrue(b *testing.B, ctx context.Context, e *env) {
	spec, err := e.ex.Resolve(shell.Request{Command: "true", Workdir: e.dir})
	if err != nil {
		b.Fatal(err)
	}
	res, err := shell.Run(ctx, e.ex, spec)
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		b.Fatal(res, err)
	}
}

// BenchmarkForegroundOverhead alternates BenchmarkForegroundTrue's and
// BenchmarkExecutorTrue's bodies and reports the ratio of their medians
// (and of their means).
func BenchmarkForegroundOverhead(b *testing.B) {
	e := newEnv(b, envOpts{})
	ctx := context.Background()
	var tool, bare []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if i%2 == 0 {
			if r := e.ts.Call(ctx, e.sess, tools.NameBash, trueArgs, nil); r.Text != "(no output)" {
				b.Fatal(r.Text)
			}
			tool = append(tool, time.Since(t0))
		} else {
			executorTrue(b, ctx, e)
			bare = append(bare, time.Since(t0))
		}
		i++
	}
	if len(tool) == 0 || len(bare) == 0 {
		return
	}
	mt, mb := quantile(tool, 0.5), quantile(bare, 0.5)
	b.ReportMetric(mt, "tool-median-ns")
	b.ReportMetric(mb, "executor-median-ns")
	b.ReportMetric(mt/mb, "tool/executor")
	b.ReportMetric(mean(tool)/mean(bare), "tool/executor-mean")
}

// BenchmarkTaskTools keeps 1,000 live background tasks (`sleep 300`)
// across 100 sessions and times task_output and task_list of random
// sessions. It reports their p99 latencies and the heap the whole stack
// (runtime, tools and executor) holds per live task, then kills them all.
func BenchmarkTaskTools(b *testing.B) {
	const sessions, perSession = 100, 10
	e := newEnv(b, envOpts{})
	ctx := context.Background()
	sess := make([]tools.Session, sessions)
	ids := make([][]string, sessions)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for s := range sessions {
		sess[s] = tools.Session{ID: fmt.Sprintf("bench-%d", s), Cwd: e.dir}
		for range perSession {
			ids[s] = append(ids[s], e.background(sess[s], "sleep 300"))
		}
	}
	startup := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perTask := float64(after.HeapAlloc-before.HeapAlloc) / (sessions * perSession)

	var outputs, lists []time.Duration
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		s := rng.IntN(sessions)
		a := json.RawMessage(`{"task_id":"` + ids[s][rng.IntN(perSession)] + `"}`)
		t0 := time.Now()
		r := e.ts.Call(ctx, sess[s], tools.NameTaskOutput, a, nil)
		t1 := time.Now()
		l := e.ts.Call(ctx, sess[s], tools.NameTaskList, nil, nil)
		t2 := time.Now()
		if r.Text != "(no new output)\n[status: running]" || len(l.Value.(tools.TaskListValue).Tasks) != perSession {
			b.Fatalf("task_output %q, task_list %q", r.Text, l.Text)
		}
		outputs, lists = append(outputs, t1.Sub(t0)), append(lists, t2.Sub(t1))
	}
	b.StopTimer()
	b.ReportMetric(quantile(outputs, 0.99), "task_output-p99-ns")
	b.ReportMetric(quantile(lists, 0.99), "task_list-p99-ns")
	b.ReportMetric(perTask, "heap-bytes/task")
	b.ReportMetric(float64(startup.Microseconds())/(sessions*perSession), "start-µs/task")

	// Kill them all, through the tool, and wait until they are gone.
	for s := range sessions {
		for _, id := range ids[s] {
			if r := e.ts.Call(ctx, sess[s], tools.NameTaskKill, json.RawMessage(`{"task_id":"`+id+`"}`), nil); r.IsError {
				b.Fatal(r.Text)
			}
		}
	}
	for s := range sessions {
		for _, id := range ids[s] {
			e.settle(sess[s], id)
		}
	}
}

func quantile(d []time.Duration, q float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(float64(len(s))*q))])
}

func mean(d []time.Duration) float64 {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return float64(sum) / float64(len(d))
}

// BenchmarkRulesOverhead alternates a bash call of `true` through tools
// without rules and through tools with 200 rules, over one executor, and
// reports the ratio of their medians ("rules/none", target <= 1.05).
func BenchmarkRulesOverhead(b *testing.B) {
	e := newEnv(b, envOpts{})
	var deny, ask, allow []string
	for i := range 200 {
		switch i % 3 {
		case 0:
			deny = append(deny, fmt.Sprintf("Bash(tool%d --force:*)", i))
		case 1:
			ask = append(ask, fmt.Sprintf("Bash(tool%d publish:*)", i))
		default:
			allow = append(allow, fmt.Sprintf("Bash(tool%d * --dry-run)", i))
		}
	}
	allow = append(allow, "Bash(true)")
	r, err := rules.Parse(deny, ask, allow, "ask")
	if err != nil {
		b.Fatal(err)
	}
	withRules := tools.New(e.ex, &tools.Options{Tasks: e.rt, Home: e.home, Rules: r})
	ctx := context.Background()
	var with, without []time.Duration
	i := 0
	for b.Loop() {
		ts := e.ts
		if i%2 == 1 {
			ts = withRules
		}
		t0 := time.Now()
		if res := ts.Call(ctx, e.sess, tools.NameBash, trueArgs, nil); res.Text != "(no output)" {
			b.Fatal(res.Text)
		}
		if i%2 == 1 {
			with = append(with, time.Since(t0))
		} else {
			without = append(without, time.Since(t0))
		}
		i++
	}
	if len(with) == 0 || len(without) == 0 {
		return
	}
	mw, mn := quantile(with, 0.5), quantile(without, 0.5)
	b.ReportMetric(mw, "rules-median-ns")
	b.ReportMetric(mn, "none-median-ns")
	b.ReportMetric(mw/mn, "rules/none")
	b.ReportMetric(mean(with)/mean(without), "rules/none-mean")
}
