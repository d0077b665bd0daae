//go:build linux

package tools_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tasks"
	"github.com/conch-dev/conch/tools"
)

// TestConcurrentSessions: 10 sessions (50 in a soak) each start 20
// background tasks and read, wait on and kill them, all at once. Every
// task prints a known
// sequence, so the reads of a task that completes must concatenate to
// exactly that sequence, and those of a killed one to a prefix of it made
// of whole lines: no byte lost, none repeated. Nothing survives.
func TestConcurrentSessions(t *testing.T) {
	// 50 sessions (1,000 processes) took 52 s of a loaded full run: 10
	// by default, 50 in a soak (testutil.SoakEnv); skipped under -short.
	const perSession = 20
	sessions := testutil.SoakSize(0, 10, 50)
	if sessions == 0 {
		t.Skip("starts 200 processes")
	}
	start := time.Now()
	e := newEnv(t, envOpts{tasks: &tasks.Options{MaxPerSession: perSession}})

	// Each task prints lines "<session>.<task>.<i>" with bash builtins only.
	expected := func(s, k, n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d.%d.%d\n", s, k, i)
		}
		return b.String()
	}
	type kind int
	const (
		completes   kind = iota // prints 200 lines and exits 0
		killedAfter             // prints 200 lines, sleeps; killed once all is read
		killedEarly             // prints 2,000 lines then sleeps; killed at once
	)
	lines := map[kind]int{completes: 200, killedAfter: 200, killedEarly: 2000}
	command := func(s, k int, kd kind) string {
		c := fmt.Sprintf("for i in {1..%d}; do echo %d.%d.$i; done", lines[kd], s, k)
		if kd != completes {
			c += "; sleep 60"
		}
		return c
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	notices := map[string]int{}
	var settles []time.Duration // from task_kill to the task settled, per killed task
	record := func(r tools.Result) {
		if len(r.Notices) == 0 {
			return
		}
		mu.Lock()
		for _, n := range r.Notices {
			notices[n.Text]++
		}
		mu.Unlock()
	}
	for s := range sessions {
		wg.Go(func() {
			sess := tools.Session{ID: fmt.Sprintf("s%d", s), Cwd: e.dir}
			call := func(name string, a map[string]any) tools.Result {
				r := e.ts.Call(t.Context(), sess, name, args(t, a), nil)
				record(r)
				return r
			}
			// read is one task_output; it checks the text against the value.
			read := func(id string, wait bool) tools.TaskOutputValue {
				r := call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": wait})
				v, ok := r.Value.(tools.TaskOutputValue)
				if r.IsError || !ok {
					t.Errorf("%s %s: task_output = %q", sess.ID, id, r.Text)
					return v
				}
				body := v.Output
				if body == "" {
					body = "(no new output)"
				}
				if !strings.HasSuffix(body, "\n") {
					body += "\n"
				}
				line := tasks.Outcome{Status: tasks.Status(v.Status), Detail: v.Detail}.StatusLine()
				if r.Text != body+line {
					t.Errorf("%s %s: text %q does not match its value %+v", sess.ID, id, r.Text, v)
				}
				return v
			}
			var tw sync.WaitGroup
			for k := range perSession {
				kd := kind(k % 3)
				r := call(tools.NameBash, map[string]any{"command": command(s, k, kd), "description": "Print a sequence", "run_in_background": true})
				if r.IsError {
					t.Errorf("%s: start %d: %s", sess.ID, k, r.Text)
					continue
				}
				id := r.Value.(tools.BackgroundValue).TaskID
				tw.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(s), uint64(k)))
					want := expected(s, k, lines[kd])
					var got strings.Builder
					var last tools.TaskOutputValue
					switch kd {
					case completes:
						for range rng.IntN(3) {
							got.WriteString(read(id, false).Output)
							time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						}
						last = read(id, true)
						got.WriteString(last.Output)
						if got.String() != want || last.Status != "completed" || last.Detail != "exit code: 0" {
							t.Errorf("%s %s: read %d bytes (want %d), last %+v", sess.ID, id, got.Len(), len(want), last)
						}
						return
					case killedAfter:
						for deadline := time.Now().Add(30 * time.Second); got.Len() < len(want) && time.Now().Before(deadline); {
							got.WriteString(read(id, false).Output)
							time.Sleep(10 * time.Millisecond)
						}
					case killedEarly:
						got.WriteString(read(id, false).Output)
					}
					// task_kill waits at most the grace plus a second: on a
					// loaded machine the task may still be stopping then.
					killed := time.Now()
					if r := call(tools.NameTaskKill, map[string]any{"task_id": id}); r.Text != "killed task "+id+" [status: killed, signal: SIGTERM]" &&
						r.Text != "requested cancellation of task "+id+"; it is still stopping" {
						t.Errorf("%s %s: kill = %q", sess.ID, id, r.Text)
					}
					last = read(id, true)
					settle := time.Since(killed)
					got.WriteString(last.Output)
					if last.Status != "killed" || last.Detail != "signal: SIGTERM" {
						t.Errorf("%s %s: after the kill %+v", sess.ID, id, last)
					}
					mu.Lock()
					settles = append(settles, settle)
					mu.Unlock()
					g := got.String()
					if !strings.HasPrefix(want, g) || (g != "" && !strings.HasSuffix(g, "\n")) || (kd == killedAfter && g != want) {
						t.Errorf("%s %s: reads are not a whole-line prefix of the sequence: %d of %d bytes, ends %q",
							sess.ID, id, len(g), len(want), g[max(0, len(g)-20):])
					}
				})
			}
			// Another session's task is out of reach, whatever its state.
			// (Probe only ids known to be foreign: ownership never changes.)
			for range 3 {
				other := fmt.Sprintf("bash-%d", 1+rand.IntN(sessions*perSession))
				if _, err := e.rt.Get(sess.ID, other); err == nil || !strings.Contains(err.Error(), "another session") {
					continue
				}
				for _, tool := range []string{tools.NameTaskKill, tools.NameTaskOutput} {
					if r := call(tool, map[string]any{"task_id": other}); r.Text != "Error: task "+other+" belongs to another session" {
						t.Errorf("%s: %s %s = %q", sess.ID, tool, other, r.Text)
					}
				}
			}
			tw.Wait()
			list := call(tools.NameTaskList, nil).Value.(tools.TaskListValue)
			if len(list.Tasks) != perSession {
				t.Errorf("%s: %d tasks listed, want %d", sess.ID, len(list.Tasks), perSession)
			}
			for _, tk := range list.Tasks {
				if tk.Status != "completed" && tk.Status != "killed" {
					t.Errorf("%s: %+v still unsettled", sess.ID, tk)
				}
			}
		})
	}
	wg.Wait()

	// Only tasks that completed on their own may have been noticed, each
	// at most once.
	for n, count := range notices {
		if count != 1 || !strings.Contains(n, "finished [status: completed, exit code: 0]") {
			t.Errorf("notice %q delivered %d times", n, count)
		}
	}
	t.Logf("%d sessions x %d tasks in %v (%d notices delivered before collection)", sessions, perSession, time.Since(start), len(notices))
	if len(settles) > 0 {
		slices.Sort(settles)
		pct := func(p int) time.Duration { return settles[(len(settles)-1)*p/100] }
		t.Logf("%d kills, task_kill to settled: p50 %v, p99 %v, max %v", len(settles), pct(50), pct(99), pct(100))
	}
}
