package tasks

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConcurrentOwners runs 50 owners × 20 tasks at once: producers emit
// known chunks, readers consume them while tasks run, some tasks are killed,
// some waited for, notices are drained as they come. Every byte must reach
// its reader exactly once and every notice must be owed.
func TestConcurrentOwners(t *testing.T) {
	const owners, perOwner = 50, 20
	r := newRuntime(t, &Options{MaxPerSession: perOwner})

	type result struct {
		id      string
		h       *handle
		want    string // every chunk, if the task was never cancelled
		got     strings.Builder
		killed  bool // Kill requested before settlement
		quiet   bool // not read until the end, never killed: must be noticed
		final   Info
		noticed int
	}
	var failMu sync.Mutex
	fail := func(format string, args ...any) {
		failMu.Lock()
		defer failMu.Unlock()
		t.Errorf(format, args...)
	}

	results := make([][]*result, owners)
	var all sync.WaitGroup
	for o := range owners {
		all.Go(func() {
			owner := fmt.Sprintf("owner-%d", o)
			rng := rand.New(rand.NewPCG(uint64(o), 1))
			res := make([]*result, perOwner)
			for i := range res {
				res[i] = &result{quiet: i%5 == 1}
			}
			results[o] = res

			// Drain notices while tasks run.
			noticesMu := sync.Mutex{}
			notices := map[string]int{}
			drain := func() {
				for _, n := range r.Notices(owner) {
					if n.Owner != owner || !n.Settled() {
						fail("notice of %s for %s: %+v", n.ID, owner, n)
					}
					noticesMu.Lock()
					notices[n.ID]++
					noticesMu.Unlock()
				}
			}
			stopDrain := make(chan struct{})
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for {
					select {
					case <-stopDrain:
						return
					default:
					}
					drain()
					for _, info := range r.List(owner) {
						if info.Owner != owner {
							fail("List(%s) shows %s of %s", owner, info.ID, info.Owner)
						}
					}
					time.Sleep(time.Millisecond)
				}
			}()

			var tasks sync.WaitGroup
			for i, res := range res {
				chunks := 5 + rng.IntN(45)
				killAfter := -1
				if !res.quiet && i%4 == 0 {
					killAfter = rng.IntN(chunks + 5) // may come after the natural end
				}
				var want strings.Builder
				for k := range chunks {
					fmt.Fprintf(&want, "%s/t%d/c%d;", owner, i, k)
				}
				res.want = want.String()
				tasks.Go(func() {
					h := newHandle()
					res.h = h
					go func() { // the producer
						for k := range chunks {
							select {
							case <-h.cancel:
								h.finish(sigterm)
								return
							default:
							}
							h.emit(fmt.Sprintf("%s/t%d/c%d;", owner, i, k))
							if k%4 == 3 {
								time.Sleep(50 * time.Microsecond)
							}
						}
						h.finish(exit0)
					}()
					info, err := r.Start(owner, "bash", fmt.Sprintf("task %d", i), func() (Handle, error) { return h, nil })
					if err != nil {
						fail("Start: %v", err)
						h.Cancel("start failed")
						<-h.Done()
						return
					}
					res.id = info.ID

					if _, _, err := r.Read("intruder", info.ID); !errors.As(err, new(*ForeignTaskError)) {
						fail("foreign Read of %s: %v", info.ID, err)
					}
					if res.quiet {
						final, err := r.Wait(t.Context(), owner, info.ID, 0)
						if err != nil || !final.Status.Settled() {
							fail("Wait %s: %+v, %v", info.ID, final, err)
						}
						res.final = final
						return
					}
					var killer sync.WaitGroup
					if killAfter >= 0 {
						killer.Go(func() {
							time.Sleep(time.Duration(killAfter) * 10 * time.Microsecond)
							_, already, err := r.Kill(owner, info.ID, "stress")
							if err != nil {
								fail("Kill %s: %v", info.ID, err)
							}
							res.killed = !already
						})
					}
					for n := 0; ; n++ {
						if n > 0 {
							// Park like a task_output wait would; it
							// returns early when the task settles.
							if _, err := r.Wait(t.Context(), owner, info.ID, time.Duration(20+n%5*40)*time.Microsecond); err != nil {
								fail("Wait %s: %v", info.ID, err)
							}
						}
						delta, got, err := r.Read(owner, info.ID)
						if err != nil {
							fail("Read %s: %v", info.ID, err)
							return
						}
						res.got.WriteString(delta)
						if got.Status.Settled() {
							// Status read before the drain: this read was complete.
							if res.got.String() != h.all() {
								fail("%s settled but its output is incomplete", info.ID)
							}
							res.final = got
							break
						}
					}
					killer.Wait()
				})
			}
			tasks.Wait()
			close(stopDrain)
			<-drained
			drain()
			for _, res := range res {
				if res.quiet {
					delta, _, err := r.Read(owner, res.id)
					if err != nil {
						fail("final Read %s: %v", res.id, err)
					}
					res.got.WriteString(delta)
				}
				res.noticed = notices[res.id]
			}
			if extra := r.Notices(owner); extra != nil {
				fail("%s: notices after every task was collected: %+v", owner, extra)
			}
			if o%2 == 0 {
				r.Dispose(owner)
				if got := r.List(owner); got != nil {
					fail("List after Dispose: %d tasks", len(got))
				}
			}
		})
	}
	all.Wait()

	var bytes, noticed, killed int
	for o, res := range results {
		for _, res := range res {
			if res.id == "" {
				continue
			}
			got := res.got.String()
			if got != res.h.all() {
				t.Errorf("%s of owner %d: delivered %d bytes of %d emitted", res.id, o, len(got), len(res.h.all()))
			}
			if !res.killed && res.final.Outcome == exit0 && got != res.want {
				t.Errorf("%s finished on its own but delivered %q", res.id, got)
			}
			if res.killed && res.noticed != 0 {
				t.Errorf("%s was killed but noticed %d times", res.id, res.noticed)
			}
			if res.noticed > 1 {
				t.Errorf("%s noticed %d times", res.id, res.noticed)
			}
			if res.quiet && res.noticed != 1 {
				t.Errorf("%s (never read before its end) noticed %d times, want 1", res.id, res.noticed)
			}
			bytes += len(got)
			noticed += res.noticed
			if res.killed {
				killed++
			}
		}
	}
	t.Logf("%d bytes delivered exactly once, %d notices, %d tasks killed", bytes, noticed, killed)
}
