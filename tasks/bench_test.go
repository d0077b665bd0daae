package tasks

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkListAndRead keeps 1,000 live tasks across 100 owners and has
// GOMAXPROCS goroutines call Get, Read and List on random tasks of random
// owners. It reports the p99 latency of each call ("p99-ns" is the worst of
// the three) and the runtime's own memory per live task ("bytes/task": heap
// plus goroutine stacks, measured around the 1,000 Starts, handles excluded).
func BenchmarkListAndRead(b *testing.B) {
	const owners, perOwner = 100, 10
	r := New(nil)
	defer r.Close()

	handles := make([]*handle, owners*perOwner)
	for i := range handles {
		h := newHandle()
		stopOnCancel(h, 0)
		h.emit("some output\n")
		handles[i] = h
	}
	defer func() {
		for _, h := range handles {
			h.finish(sigterm)
		}
	}()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ids := make([][]string, owners)
	for o := range owners {
		for i := range perOwner {
			h := handles[o*perOwner+i]
			info, err := r.Start(fmt.Sprintf("owner-%d", o), "bash", "sleep 600", func() (Handle, error) { return h, nil })
			if err != nil {
				b.Fatal(err)
			}
			ids[o] = append(ids[o], info.ID)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	used := (after.HeapAlloc + after.StackInuse) - (before.HeapAlloc + before.StackInuse)
	perTask := float64(used) / float64(owners*perOwner)

	var mu sync.Mutex
	var gets, reads, lists []time.Duration
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		var g, rd, l []time.Duration
		for pb.Next() {
			o := rng.IntN(owners)
			owner := fmt.Sprintf("owner-%d", o)
			id := ids[o][rng.IntN(perOwner)]

			t0 := time.Now()
			if _, err := r.Get(owner, id); err != nil {
				b.Error(err)
			}
			t1 := time.Now()
			if _, _, err := r.Read(owner, id); err != nil {
				b.Error(err)
			}
			t2 := time.Now()
			if n := len(r.List(owner)); n != perOwner {
				b.Errorf("List: %d tasks", n)
			}
			t3 := time.Now()
			g, rd, l = append(g, t1.Sub(t0)), append(rd, t2.Sub(t1)), append(l, t3.Sub(t2))
		}
		mu.Lock()
		gets, reads, lists = append(gets, g...), append(reads, rd...), append(lists, l...)
		mu.Unlock()
	})
	b.StopTimer()

	worst := 0.0
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"get-p99-ns", gets}, {"read-p99-ns", reads}, {"list-p99-ns", lists}} {
		p := p99(m.d)
		b.ReportMetric(p, m.name)
		worst = max(worst, p)
	}
	b.ReportMetric(worst, "p99-ns")
	b.ReportMetric(perTask, "bytes/task")
}

func p99(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[(len(d)*99)/100])
}
