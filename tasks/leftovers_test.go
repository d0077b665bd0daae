package tasks

import (
	"sync"
	"testing"
)

// lingering is a handle whose work left processes running: left of them
// until KillLeftovers; counts records how often it was asked.
type lingering struct {
	*handle
	mu     sync.Mutex
	left   int
	counts int
}

func (h *lingering) Leftovers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts++
	return h.left
}

func (h *lingering) KillLeftovers() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.left = 0
	return nil
}

func (h *lingering) asked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts
}

// TestLeftovers: a settled task whose work left processes running says so
// in every snapshot (status line, list, notice) until KillLeftovers ends
// them; a running task is never counted, and once a count finds nothing,
// none is made again.
func TestLeftovers(t *testing.T) {
	r := newRuntime(t, nil)
	h := &lingering{handle: newHandle(), left: 2}
	info, err := r.Start("s", "bash", "loop", func() (Handle, error) { return h, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get("s", info.ID); got.Leftovers != 0 || h.asked() != 0 {
		t.Errorf("running: Leftovers %d, asked %d times; want 0, 0", got.Leftovers, h.asked())
	}
	if n, _, err := r.KillLeftovers("s", info.ID); n != 0 || err != nil {
		t.Errorf("KillLeftovers of a running task: %d, %v; want 0, nil", n, err)
	}
	h.finish(exit0)
	got := settle(t, r, "s", info.ID)
	const want = "[status: completed, exit code: 0; 2 processes it started are still running]"
	if got.Leftovers != 2 || got.StatusLine() != want {
		t.Errorf("settled: %d, %q; want 2, %q", got.Leftovers, got.StatusLine(), want)
	}
	if ns := r.Notices("s"); len(ns) != 1 || ns[0].StatusLine() != want {
		t.Errorf("notices %+v, want one with %q", ns, want)
	}
	if l := r.List("s"); len(l) != 1 || l[0].Leftovers != 2 {
		t.Errorf("list %+v, want one task with 2 leftovers", l)
	}
	if _, got, _ := r.Read("s", info.ID); got.StatusLine() != want {
		t.Errorf("read: %q, want %q", got.StatusLine(), want)
	}
	n, after, err := r.KillLeftovers("s", info.ID)
	if n != 2 || err != nil || after.Leftovers != 0 || after.StatusLine() != "[status: completed, exit code: 0]" {
		t.Errorf("KillLeftovers: %d, %v, %q; want 2, nil, the plain status line", n, err, after.StatusLine())
	}
	asked := h.asked()
	r.Get("s", info.ID)
	r.List("s")
	if h.asked() != asked {
		t.Errorf("counted again after a count found nothing (%d, then %d)", asked, h.asked())
	}
	if _, already, _ := r.Kill("s", info.ID, "x"); !already {
		t.Error("Kill of the settled task: not already finished")
	}
}
