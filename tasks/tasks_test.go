package tasks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGoldenStrings(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"status line running", Outcome{Status: StatusRunning}.StatusLine(), "[status: running]"},
		{"status line stopping", Outcome{Status: StatusStopping}.StatusLine(), "[status: stopping]"},
		{"status line exit 0", exit0.StatusLine(), "[status: completed, exit code: 0]"},
		{"status line exit 1", Outcome{Status: StatusCompleted, ExitCode: intp(1)}.StatusLine(), "[status: completed, exit code: 1]"},
		{"status line signal", sigterm.StatusLine(), "[status: killed, signal: SIGTERM]"},
		{"status line killed before exit", Outcome{Status: StatusKilled, Detail: "killed before exit"}.StatusLine(), "[status: killed, killed before exit]"},
		{"status line timed out", Outcome{Status: StatusKilled, Signal: "SIGTERM", TimedOut: true, Timeout: 800 * time.Millisecond}.StatusLine(),
			"[status: killed, timed out after 800ms, signal: SIGTERM]"},
		{"status line timed out, trapped", Outcome{Status: StatusKilled, ExitCode: intp(0), TimedOut: true, Timeout: time.Second}.StatusLine(),
			"[status: killed, timed out after 1000ms, exit code: 0]"},
		{"status line signal wins over exit code", Outcome{Status: StatusKilled, ExitCode: intp(0), Signal: "SIGKILL"}.StatusLine(), "[status: killed, signal: SIGKILL]"},
		{"limit", (&LimitError{Limit: 10}).Error(), "background task limit reached for this session (limit: 10)"},
		{"unknown, none", (&UnknownTaskError{ID: "bash-9"}).Error(), "unknown task bash-9; you have no background tasks"},
		{"unknown, yours", (&UnknownTaskError{ID: "bash-9", Yours: []string{"bash-2", "bash-1"}}).Error(), "unknown task bash-9; your tasks: bash-2, bash-1"},
		{"foreign", (&ForeignTaskError{ID: "bash-1"}).Error(), "task bash-1 belongs to another session"},
		{"wait aborted", ErrWaitAborted.Error(), "wait aborted"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}

// noticeLines renders notices as "<id> <label> <status line> | <last
// output>" for comparisons.
func noticeLines(ns []Notice) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID+" "+n.Label+" "+n.Outcome.StatusLine()+" | "+n.LastOutput)
	}
	return out
}

func TestStatusSettled(t *testing.T) {
	for s, want := range map[Status]bool{
		StatusRunning: false, StatusStopping: false, "": false,
		StatusCompleted: true, StatusKilled: true, StatusFailed: true,
	} {
		if got := s.Settled(); got != want {
			t.Errorf("%q.Settled() = %v, want %v", s, got, want)
		}
	}
}

func TestIDsCountPerKind(t *testing.T) {
	r := newRuntime(t, nil)
	var got []string
	for _, s := range []struct{ owner, kind string }{
		{"a", "bash"}, {"b", "bash"}, {"a", "pty"}, {"b", "bash"}, {"a", "pty"},
	} {
		_, info := startKillable(t, r, s.owner, s.kind, "x")
		got = append(got, info.ID)
		if info.Owner != s.owner || info.Kind != s.kind || info.Label != "x" || info.Status != StatusRunning || info.Started.IsZero() {
			t.Errorf("Start info = %+v", info)
		}
	}
	want := []string{"bash-1", "bash-2", "pty-1", "bash-3", "pty-2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestRefusedStartConsumesNothing(t *testing.T) {
	r := newRuntime(t, &Options{MaxPerSession: 2})
	h1, _ := startManual(t, r, "a", "bash", "one")
	startManual(t, r, "a", "bash", "two")

	called := false
	_, err := r.Start("a", "bash", "three", func() (Handle, error) { called = true; return newHandle(), nil })
	var limit *LimitError
	if !errors.As(err, &limit) || limit.Limit != 2 {
		t.Fatalf("third Start: err = %v, want *LimitError{2}", err)
	}
	if called {
		t.Fatal("a refused Start called start")
	}
	// Another owner has its own slots.
	if _, info := startKillable(t, r, "b", "bash", "b"); info.ID != "bash-3" {
		t.Fatalf("other owner got %s, want bash-3", info.ID)
	}

	h1.finish(exit0)
	settle(t, r, "a", "bash-1")
	if _, info := startKillable(t, r, "a", "bash", "three"); info.ID != "bash-4" {
		t.Fatalf("after a slot freed: id %s, want bash-4", info.ID)
	}
}

func TestFailedStartConsumesNothing(t *testing.T) {
	r := newRuntime(t, &Options{MaxPerSession: 1})
	boom := errors.New("boom")
	if _, err := r.Start("a", "bash", "x", func() (Handle, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Start error = %v, want boom", err)
	}
	if _, err := r.Start("a", "bash", "x", func() (Handle, error) { return nil, nil }); err == nil {
		t.Fatal("Start with a nil Handle and nil error succeeded")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a panicking start did not panic through Start")
			}
		}()
		r.Start("a", "bash", "x", func() (Handle, error) { panic("producer bug") })
	}()
	// The slot (limit 1) was released every time and no number was used.
	if _, info := startKillable(t, r, "a", "bash", "x"); info.ID != "bash-1" {
		t.Fatalf("id %s, want bash-1", info.ID)
	}
	if got := r.List("a"); len(got) != 1 {
		t.Fatalf("List = %+v, want one task", got)
	}
}

func TestAccessChecks(t *testing.T) {
	r := newRuntime(t, nil)
	startKillable(t, r, "a", "bash", "x")

	check := func(name string, err error, want string, unknown bool) {
		t.Helper()
		if err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", name, err, want)
			return
		}
		var u *UnknownTaskError
		var f *ForeignTaskError
		if unknown && !errors.As(err, &u) || !unknown && !errors.As(err, &f) {
			t.Errorf("%s: err has type %T", name, err)
		}
	}
	for _, c := range []struct {
		owner, id, want string
		unknown         bool
	}{
		{"b", "bash-9", "unknown task bash-9; you have no background tasks", true}, // unknown comes first, whoever asks
		{"a", "bash-9", "unknown task bash-9; your tasks: bash-1", true},
		{"b", "bash-1", "task bash-1 belongs to another session", false},
	} {
		_, err := r.Get(c.owner, c.id)
		check("Get", err, c.want, c.unknown)
		_, _, err = r.Read(c.owner, c.id)
		check("Read", err, c.want, c.unknown)
		_, err = r.Wait(t.Context(), c.owner, c.id, time.Millisecond)
		check("Wait", err, c.want, c.unknown)
		_, _, err = r.Kill(c.owner, c.id, "r")
		check("Kill", err, c.want, c.unknown)
	}
	if info, err := r.Get("a", "bash-1"); err != nil || info.Status != StatusRunning {
		t.Fatalf("a foreign Kill touched the task: %+v, %v", info, err)
	}
}

func TestListIsolationAndOrder(t *testing.T) {
	r := newRuntime(t, nil)
	if got := r.List("a"); got != nil {
		t.Fatalf("List of an unknown owner = %+v", got)
	}
	hA1, _ := startManual(t, r, "a", "bash", "a1")
	startKillable(t, r, "b", "bash", "b1")
	startKillable(t, r, "a", "pty", "a2")
	startKillable(t, r, "b", "bash", "b2")
	startKillable(t, r, "a", "bash", "a3")
	hA1.finish(exit3)
	settle(t, r, "a", "bash-1")

	type row struct {
		ID, Label, Owner string
		Status           Status
		Outcome          Outcome
	}
	rows := func(infos []Info) []row {
		var out []row
		for _, i := range infos {
			out = append(out, row{i.ID, i.Label, i.Owner, i.Status, i.Outcome})
		}
		return out
	}
	wantA := []row{
		{"bash-1", "a1", "a", StatusCompleted, exit3},
		{"pty-1", "a2", "a", StatusRunning, Outcome{Status: StatusRunning}},
		{"bash-4", "a3", "a", StatusRunning, Outcome{Status: StatusRunning}},
	}
	wantB := []row{
		{"bash-2", "b1", "b", StatusRunning, Outcome{Status: StatusRunning}},
		{"bash-3", "b2", "b", StatusRunning, Outcome{Status: StatusRunning}},
	}
	if diff := cmp.Diff(wantA, rows(r.List("a"))); diff != "" {
		t.Errorf("List(a) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantB, rows(r.List("b"))); diff != "" {
		t.Errorf("List(b) (-want +got):\n%s", diff)
	}
	if got := r.List("c"); got != nil {
		t.Errorf("List(c) = %+v", got)
	}
}

func TestStoppingTaskKeepsItsSlot(t *testing.T) {
	r := newRuntime(t, &Options{MaxPerSession: 2})
	h1, i1 := startManual(t, r, "a", "bash", "one")
	startManual(t, r, "a", "bash", "two")

	info, already, err := r.Kill("a", i1.ID, "not needed")
	if err != nil || already || info.Status != StatusStopping {
		t.Fatalf("Kill = %+v, %v, %v", info, already, err)
	}
	var limit *LimitError
	if _, err := r.Start("a", "bash", "three", func() (Handle, error) { return newHandle(), nil }); !errors.As(err, &limit) {
		t.Fatalf("Start while a task is stopping: err = %v, want *LimitError", err)
	}
	h1.finish(sigterm)
	if info := settle(t, r, "a", i1.ID); info.Outcome != sigterm {
		t.Fatalf("settled as %+v", info.Outcome)
	}
	if _, info := startKillable(t, r, "a", "bash", "three"); info.ID != "bash-3" {
		t.Fatalf("id %s, want bash-3", info.ID)
	}
}

func TestConcurrentStartsRespectTheLimit(t *testing.T) {
	const limit, tries = 5, 60
	r := newRuntime(t, &Options{MaxPerSession: limit})
	var inStart, maxInStart atomic.Int32
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for range tries {
		wg.Go(func() {
			h := newHandle()
			stopOnCancel(h, 0)
			_, err := r.Start("a", "bash", "x", func() (Handle, error) {
				n := inStart.Add(1)
				for {
					m := maxInStart.Load()
					if n <= m || maxInStart.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				inStart.Add(-1)
				return h, nil
			})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, new(*LimitError)):
				refused.Add(1)
				h.finish(sigterm)
			default:
				t.Errorf("Start: %v", err)
				h.finish(sigterm)
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit || refused.Load() != tries-limit || maxInStart.Load() > limit {
		t.Fatalf("ok %d refused %d max concurrent starts %d; want %d, %d, <= %d",
			ok.Load(), refused.Load(), maxInStart.Load(), limit, tries-limit, limit)
	}
	infos := r.List("a")
	for i, info := range infos {
		if want := "bash-" + string(rune('1'+i)); info.ID != want {
			t.Errorf("List[%d].ID = %s, want %s (ids in start order)", i, info.ID, want)
		}
	}
}

func TestKill(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "sleep 60")
	h.emit("partial\n")

	got, already, err := r.Kill("a", info.ID, "user asked")
	if err != nil || already || got.Status != StatusStopping || got.Outcome.StatusLine() != "[status: stopping]" {
		t.Fatalf("Kill running = %+v, %v, %v", got, already, err)
	}
	if diff := cmp.Diff([]string{"user asked"}, h.cancelReasons()); diff != "" {
		t.Fatalf("Cancel reasons (-want +got):\n%s", diff)
	}
	select {
	case <-h.Done():
		t.Fatal("the handle ended; Kill should return before the work ends")
	default:
	}

	// Stopping: not a new cancellation.
	got, already, err = r.Kill("a", info.ID, "again")
	if err != nil || already || got.Status != StatusStopping {
		t.Fatalf("Kill stopping = %+v, %v, %v", got, already, err)
	}
	if n := len(h.cancelReasons()); n != 1 {
		t.Fatalf("Cancel called %d times, want 1", n)
	}

	h.emit("last words\n")
	h.finish(sigterm)
	settle(t, r, "a", info.ID)

	// Settled: reported as already finished, output untouched and readable.
	got, already, err = r.Kill("a", info.ID, "late")
	if err != nil || !already || got.Outcome != sigterm {
		t.Fatalf("Kill settled = %+v, %v, %v", got, already, err)
	}
	if n := len(h.cancelReasons()); n != 1 {
		t.Fatalf("Cancel called %d times, want 1", n)
	}
	delta, got, err := r.Read("a", info.ID)
	if err != nil || delta != "partial\nlast words\n" || got.Outcome != sigterm {
		t.Fatalf("Read after Kill = %q, %+v, %v", delta, got, err)
	}
	if n := r.Notices("a"); n != nil {
		t.Fatalf("notices after Kill: %+v", n)
	}
}

func TestKillAfterSelfFinishKeepsTheNotice(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "true")
	h.finish(exit0)
	settle(t, r, "a", info.ID)
	if _, already, _ := r.Kill("a", info.ID, "late"); !already {
		t.Fatal("Kill of a settled task did not report already finished")
	}
	if got := r.Notices("a"); len(got) != 1 {
		t.Fatalf("notices = %+v, want the one of a task that finished on its own", got)
	}
}

func TestFirstSettlementWins(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "x")
	h.finish(exit3)
	settle(t, r, "a", info.ID)
	h.setOutcome(sigterm) // a producer that changes its mind is ignored
	r.Kill("a", info.ID, "late")
	for _, got := range []Info{must(r.Get("a", info.ID)), r.List("a")[0]} {
		if got.Status != StatusCompleted || got.Outcome != exit3 {
			t.Fatalf("after settlement: %+v", got)
		}
	}

	// A Kill that loses the race with a natural exit keeps the producer's
	// verdict: the runtime does not invent one.
	h2, info2 := startManual(t, r, "a", "bash", "y")
	r.Kill("a", info2.ID, "r")
	h2.finish(exit0)
	if got := settle(t, r, "a", info2.ID); got.Outcome != exit0 {
		t.Fatalf("stopping task settled as %+v", got.Outcome)
	}
}

func TestUnsettledOutcomeIsAFailure(t *testing.T) {
	r := newRuntime(t, nil)
	for i, out := range []Outcome{{}, {Status: StatusRunning, Detail: "oops"}, {Status: StatusStopping}} {
		h, info := startManual(t, r, "a", "bash", "x")
		h.finish(out)
		got := settle(t, r, "a", info.ID)
		want := []string{
			`[status: failed, producer reported status "" at exit]`,
			`[status: failed, producer reported status "running" at exit (oops)]`,
			`[status: failed, producer reported status "stopping" at exit]`,
		}[i]
		if got.Status != StatusFailed || got.Outcome.StatusLine() != want {
			t.Errorf("outcome %+v settled as %+v, want %s", out, got.Outcome, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWait runs in a synctest bubble: the handles are in memory, so the
// waits' timers run on the bubble's clock and their durations are exact.
func TestWait(t *testing.T) {
	t.Run("finishes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRuntime(t, nil)
			h, info := startManual(t, r, "a", "bash", "sleep 0.02")
			go func() {
				time.Sleep(20 * time.Millisecond)
				h.emit("done\n")
				h.finish(exit0)
			}()
			start := time.Now()
			got, err := r.Wait(t.Context(), "a", info.ID, 10*time.Second)
			if err != nil || got.Outcome != exit0 {
				t.Fatalf("Wait = %+v, %v", got, err)
			}
			if d := time.Since(start); d != 20*time.Millisecond {
				t.Fatalf("Wait returned after %v, want when the task finished (20ms)", d)
			}
			// Settled before the read, so the read is complete.
			if delta, _, _ := r.Read("a", info.ID); delta != "done\n" {
				t.Fatalf("Read = %q", delta)
			}
		})
	})

	t.Run("times out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRuntime(t, nil)
			h, info := startManual(t, r, "a", "bash", "sleep 60")
			start := time.Now()
			got, err := r.Wait(t.Context(), "a", info.ID, 30*time.Millisecond)
			if err != nil || got.Status != StatusRunning || got.Outcome.StatusLine() != "[status: running]" {
				t.Fatalf("Wait = %+v, %v", got, err)
			}
			if d := time.Since(start); d != 30*time.Millisecond {
				t.Fatalf("Wait returned after %v, want 30ms", d)
			}
			if got := must(r.Get("a", info.ID)); got.Status != StatusRunning || len(h.cancelReasons()) != 0 {
				t.Fatalf("a timed-out wait touched the task: %+v", got)
			}
		})
	})

	t.Run("aborted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRuntime(t, nil)
			_, info := startManual(t, r, "a", "bash", "sleep 60")
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			got, err := r.Wait(ctx, "a", info.ID, 0)
			if !errors.Is(err, ErrWaitAborted) || err.Error() != "wait aborted" || got.Status != StatusRunning {
				t.Fatalf("Wait = %+v, %v", got, err)
			}
			if d := time.Since(start); d != 20*time.Millisecond {
				t.Fatalf("Wait returned after %v, want at the abort (20ms)", d)
			}
		})
	})

	r := newRuntime(t, nil)
	t.Run("settled wins over a done ctx", func(t *testing.T) {
		h, info := startManual(t, r, "a", "bash", "true")
		h.finish(exit0)
		settle(t, r, "a", info.ID)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for range 20 {
			if got, err := r.Wait(ctx, "a", info.ID, time.Second); err != nil || got.Outcome != exit0 {
				t.Fatalf("Wait = %+v, %v", got, err)
			}
		}
	})
}

func TestReadStatusBeforeDrain(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "x")
	h.emit("one ")
	if d, got, _ := r.Read("a", info.ID); d != "one " || got.Status != StatusRunning {
		t.Fatalf("Read = %q, %s", d, got.Status)
	}
	if d, _, _ := r.Read("a", info.ID); d != "" {
		t.Fatalf("Read with nothing new = %q", d)
	}
	h.emit("two")
	h.finish(exit0)
	settle(t, r, "a", info.ID)
	if d, got, _ := r.Read("a", info.ID); d != "two" || got.Outcome != exit0 {
		t.Fatalf("Read = %q, %+v", d, got)
	}
}

func TestNotices(t *testing.T) {
	var mu sync.Mutex
	pushed := map[string]int{}
	r := newRuntime(t, &Options{OnNotice: func(owner string) {
		mu.Lock()
		pushed[owner]++
		mu.Unlock()
	}})
	pushes := func(owner string) int {
		mu.Lock()
		defer mu.Unlock()
		return pushed[owner]
	}

	// Self-finished and never read: one notice, drained once.
	h1, i1 := startManual(t, r, "a", "bash", "sleep 1")
	// Killed: none.
	h2, i2 := startManual(t, r, "a", "bash", "sleep 60")
	// Read while running, then finished: still noticed.
	h3, i3 := startManual(t, r, "a", "bash", "make")
	// Collected (Wait then Read) before the drain: withdrawn.
	h4, i4 := startManual(t, r, "a", "bash", "ls")
	// Another owner's task: its own notice.
	h5, i5 := startManual(t, r, "b", "pty", "top")

	r.Kill("a", i2.ID, "r")
	h2.finish(sigterm)
	h3.emit("building\n")
	r.Read("a", i3.ID)
	h3.finish(exit3)
	h1.finish(exit0)
	h4.finish(exit0)
	h5.finish(Outcome{Status: StatusKilled, Detail: "killed before exit"})
	for _, id := range []string{i1.ID, i2.ID, i3.ID, i4.ID} {
		settle(t, r, "a", id)
	}
	settle(t, r, "b", i5.ID)
	if _, _, err := r.Read("a", i4.ID); err != nil {
		t.Fatal(err)
	}

	got := noticeLines(r.Notices("a"))
	// The watchers race, so compare as a set; TestNoticesInSettlementOrder
	// checks the order. bash-3's output was read before it finished.
	want := map[string]bool{
		"bash-3 make [status: completed, exit code: 3] | ":    true,
		"bash-1 sleep 1 [status: completed, exit code: 0] | ": true,
	}
	if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
		t.Fatalf("Notices(a) = %q", got)
	}
	if again := r.Notices("a"); again != nil {
		t.Fatalf("second drain = %+v", again)
	}
	if diff := cmp.Diff([]string{"pty-1 top [status: killed, killed before exit] | "}, noticeLines(r.Notices("b"))); diff != "" {
		t.Fatalf("Notices(b) (-want +got):\n%s", diff)
	}
	// OnNotice fired for every notice that became pending, the withdrawn
	// one included (it is withdrawn at drain time).
	if pushes("a") != 3 || pushes("b") != 1 {
		t.Fatalf("OnNotice calls: %v", pushed)
	}

	// A read after the drain does not resurrect anything, and a notice is
	// never repeated.
	r.Read("a", i1.ID)
	if n := r.Notices("a"); n != nil {
		t.Fatalf("notices after a late read = %+v", n)
	}
}

func TestNoticesInSettlementOrder(t *testing.T) {
	r := newRuntime(t, nil)
	var hs []*handle
	var ids []string
	for _, label := range []string{"first", "second", "third"} {
		h, info := startManual(t, r, "a", "bash", label)
		hs = append(hs, h)
		ids = append(ids, info.ID)
	}
	for _, i := range []int{2, 0, 1} {
		hs[i].finish(exit0)
		settle(t, r, "a", ids[i])
	}
	got := noticeLines(r.Notices("a"))
	want := []string{
		"bash-3 third [status: completed, exit code: 0] | ",
		"bash-1 first [status: completed, exit code: 0] | ",
		"bash-2 second [status: completed, exit code: 0] | ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Notices (-want +got):\n%s", diff)
	}
}

func TestReadOfSettledTaskPreventsTheNotice(t *testing.T) {
	var pushes atomic.Int32
	r := newRuntime(t, &Options{OnNotice: func(string) { pushes.Add(1) }})
	h, info := startManual(t, r, "a", "bash", "x")
	h.finish(exit0)
	settle(t, r, "a", info.ID)
	// A foreign read does not collect.
	if _, _, err := r.Read("b", info.ID); err == nil {
		t.Fatal("foreign read succeeded")
	}
	r.Read("a", info.ID)
	if got := r.Notices("a"); got != nil {
		t.Fatalf("notice survived the collection: %+v", got)
	}
}

func TestDispose(t *testing.T) {
	var pushes atomic.Int32
	r := newRuntime(t, &Options{OnNotice: func(string) { pushes.Add(1) }})

	// a: a running task that ends 30ms after its cancel, a stopping one, a
	// settled one with a pending notice.
	slow := newHandle()
	stopOnCancel(slow, 30*time.Millisecond)
	if _, err := r.Start("a", "bash", "slow", func() (Handle, error) { return slow, nil }); err != nil {
		t.Fatal(err)
	}
	stopping := newHandle()
	stopOnCancel(stopping, 50*time.Millisecond)
	si, err := r.Start("a", "bash", "stopping", func() (Handle, error) { return stopping, nil })
	if err != nil {
		t.Fatal(err)
	}
	settledH, sti := startManual(t, r, "a", "bash", "settled")
	settledH.finish(exit0)
	settle(t, r, "a", sti.ID)
	// b: untouched.
	bh, bi := startKillable(t, r, "b", "bash", "b")

	// Stopping for 50ms: Dispose must await it without cancelling it again.
	r.Kill("a", si.ID, "earlier kill")
	pushesBefore := pushes.Load()

	r.Dispose("a")
	select {
	case <-slow.Done():
	default:
		t.Fatal("Dispose returned before a task's work ended")
	}
	if diff := cmp.Diff([]string{"owner disposed"}, slow.cancelReasons()); diff != "" {
		t.Errorf("slow cancel reasons (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"earlier kill"}, stopping.cancelReasons()); diff != "" {
		t.Errorf("stopping cancel reasons (-want +got):\n%s", diff)
	}
	for _, id := range []string{"bash-1", si.ID, sti.ID} {
		var u *UnknownTaskError
		if _, err := r.Get("a", id); !errors.As(err, &u) {
			t.Errorf("Get(%s) after Dispose: %v, want unknown task", id, err)
		}
	}
	if got := r.List("a"); got != nil {
		t.Errorf("List(a) after Dispose = %+v", got)
	}
	if got := r.Notices("a"); got != nil {
		t.Errorf("Notices(a) after Dispose = %+v", got)
	}
	if pushes.Load() != pushesBefore {
		t.Errorf("OnNotice called during Dispose")
	}
	if got := must(r.Get("b", bi.ID)); got.Status != StatusRunning || len(bh.cancelReasons()) != 0 {
		t.Errorf("b's task after Dispose(a): %+v", got)
	}

	r.Dispose("a")      // again: no-op
	r.Dispose("nobody") // unknown: no-op

	// The owner may start afresh; counters keep counting.
	if _, info := startKillable(t, r, "a", "bash", "new"); info.ID != "bash-5" {
		t.Errorf("id after Dispose = %s, want bash-5", info.ID)
	}
}

func TestDisposeWhileStarting(t *testing.T) {
	for _, closeIt := range []bool{false, true} {
		r := newRuntime(t, nil)
		h := newHandle()
		stopOnCancel(h, 10*time.Millisecond)
		entered, release := make(chan struct{}), make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			_, err := r.Start("a", "bash", "x", func() (Handle, error) {
				close(entered)
				<-release
				return h, nil
			})
			errc <- err
		}()
		<-entered
		disposed := make(chan struct{})
		go func() {
			if closeIt {
				r.Close()
			} else {
				r.Dispose("a")
			}
			close(disposed)
		}()
		select {
		case <-disposed:
			t.Fatal("disposal returned while a Start was in progress")
		case <-time.After(20 * time.Millisecond):
		}
		close(release)
		<-disposed
		err := <-errc
		want := ErrOwnerDisposed
		if closeIt {
			want = ErrClosed
		}
		if !errors.Is(err, want) {
			t.Fatalf("close=%v: Start err = %v, want %v", closeIt, err, want)
		}
		select {
		case <-h.Done():
		default:
			t.Fatal("the handle started during disposal was not awaited")
		}
		if diff := cmp.Diff([]string{"owner disposed"}, h.cancelReasons()); diff != "" {
			t.Fatalf("cancel reasons (-want +got):\n%s", diff)
		}
		if !closeIt {
			if _, info := startKillable(t, r, "a", "bash", "y"); info.ID != "bash-1" {
				t.Fatalf("id %s, want bash-1 (the aborted start consumed no number)", info.ID)
			}
		}
	}
}

func TestClose(t *testing.T) {
	r := New(nil)
	var hs []*handle
	for _, owner := range []string{"a", "b", "c"} {
		for range 3 {
			h, _ := startKillable(t, r, owner, "bash", "x")
			hs = append(hs, h)
		}
	}
	r.Close()
	for _, h := range hs {
		select {
		case <-h.Done():
		default:
			t.Fatal("Close returned before every task ended")
		}
		if diff := cmp.Diff([]string{"owner disposed"}, h.cancelReasons()); diff != "" {
			t.Fatalf("cancel reasons (-want +got):\n%s", diff)
		}
	}
	called := false
	if _, err := r.Start("a", "bash", "x", func() (Handle, error) { called = true; return nil, nil }); !errors.Is(err, ErrClosed) || called {
		t.Fatalf("Start after Close: %v (start called: %v)", err, called)
	}
	if got := r.List("a"); got != nil {
		t.Fatalf("List after Close = %+v", got)
	}
	r.Close() // idempotent
}

// TestActingOnEndedWork: once a Handle's work has ended, Kill and Read see
// it ended even if the watcher has not yet run: Kill reports the task as
// already finished (its notice stays owed: it ended on its own) and does
// not cancel it; Read reports the final outcome with the rest of the output
// and collects it (no notice). Without that, the first call after the end
// races the watcher. (Many rounds: the watcher often wins the race.)
func TestActingOnEndedWork(t *testing.T) {
	r := newRuntime(t, &Options{MaxPerSession: 1})
	for i := range 50 {
		h, info := startManual(t, r, "a", "bash", "x")
		h.emit("out\n")
		h.finish(exit0)
		got, already, err := r.Kill("a", info.ID, "late")
		if err != nil || !already || got.Outcome != exit0 || len(h.cancelReasons()) != 0 {
			t.Fatalf("round %d: Kill of ended work = %+v, already %v, %v (cancels %q)", i, got, already, err, h.cancelReasons())
		}
		if n := r.Notices("a"); len(n) != 1 {
			t.Fatalf("round %d: notices %+v, want the one of work that ended on its own", i, n)
		}
		r.Read("a", info.ID)

		h, info = startManual(t, r, "a", "bash", "y")
		h.emit("rest\n")
		h.finish(exit3)
		d, got, err := r.Read("a", info.ID)
		if err != nil || d != "rest\n" || got.Outcome != exit3 {
			t.Fatalf("round %d: Read of ended work = %q, %+v, %v", i, d, got, err)
		}
		if n := r.Notices("a"); n != nil {
			t.Fatalf("round %d: notices %+v after the owner read the final outcome", i, n)
		}
	}
}
