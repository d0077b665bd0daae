//go:build linux

package tools_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/tools"
)

// BenchmarkTaskMemory runs 1,000 background tasks that each print 128 KiB
// in one session, reads each once (task_output with wait), and reports
// the heap in use after a GC ("heap-MiB") and the process's resident
// memory ("rss-MiB") at the end. A session keeps at most 100 settled
// tasks, and a task read to its end should hold no output in memory: the
// target is under 64 MiB. Run it with
//
//	go test -run '^$' -bench TaskMemory -benchtime 1x ./tools/
func BenchmarkTaskMemory(b *testing.B) {
	const tasks, perTask = 1000, 128 << 10
	for b.Loop() {
		e := newEnv(b, envOpts{})
		command := "yes 0123456789abcdef | head -c " + strconv.Itoa(perTask)
		for range tasks {
			r := e.call(tools.NameBash, map[string]any{"command": command, "description": "Print 128 KiB", "run_in_background": true})
			if r.IsError {
				b.Fatal(r.Text)
			}
			id := r.Value.(tools.BackgroundValue).TaskID
			r = e.call(tools.NameTaskOutput, map[string]any{"task_id": id, "wait": true})
			if !strings.HasSuffix(r.Text, "[status: completed, exit code: 0]") {
				b.Fatalf("%s: %q", id, r.Text[max(0, len(r.Text)-200):])
			}
		}
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(rssBytes(b))/(1<<20), "rss-MiB")
		b.ReportMetric(float64(len(e.rt.List(e.sess.ID))), "tasks-kept")
	}
}

// rssBytes is this process's resident set size (VmRSS).
func rssBytes(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
