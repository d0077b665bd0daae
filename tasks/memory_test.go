package tasks

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
	"weak"

	"github.com/google/go-cmp/cmp"
)

// TestMaxFinished: past Options.MaxFinished settled tasks, an owner
// forgets the oldest: collected ones first, then those with no notice
// pending, and only when every settled task owes its notice the oldest of
// those, whose notice is dropped. Running tasks are never forgotten, and
// a forgotten id is unknown.
func TestMaxFinished(t *testing.T) {
	r := newRuntime(t, &Options{MaxFinished: 3, MaxPerSession: 20})
	finish := func(label string, collect bool) string {
		t.Helper()
		h, info := startManual(t, r, "a", "bash", label)
		h.emit(label + "\n")
		h.finish(exit0)
		settle(t, r, "a", info.ID)
		if collect {
			r.Read("a", info.ID)
		}
		return info.ID
	}
	ids := func() []string {
		var out []string
		for _, i := range r.List("a") {
			out = append(out, i.ID)
		}
		return out
	}

	_, running := startManual(t, r, "a", "bash", "running") // bash-1
	noticed := finish("noticed", false)                     // bash-2: its notice goes out below
	collected := finish("collected", true)                  // bash-3
	if got := noticeLines(r.Notices("a")); len(got) != 1 || !strings.HasPrefix(got[0], noticed+" ") {
		t.Fatalf("notices = %q", got)
	}
	pending := finish("pending", false) // bash-4: owes its notice
	if diff := cmp.Diff([]string{running.ID, noticed, collected, pending}, ids()); diff != "" {
		t.Fatalf("at the limit (-want +got):\n%s", diff)
	}

	// A fourth settled task: the collected one goes, though older ones
	// were not collected.
	fifth := finish("fifth", true) // bash-5, collected
	if diff := cmp.Diff([]string{running.ID, noticed, pending, fifth}, ids()); diff != "" {
		t.Fatalf("after the 4th (-want +got):\n%s", diff)
	}
	var unknown *UnknownTaskError
	if _, _, err := r.Read("a", collected); !errors.As(err, &unknown) {
		t.Fatalf("Read of a forgotten task: %v, want unknown task", err)
	}
	// Then the collected fifth, then the one whose notice went out.
	finish("sixth", false) // bash-6, owes its notice
	if diff := cmp.Diff([]string{running.ID, noticed, pending, "bash-6"}, ids()); diff != "" {
		t.Fatalf("after the 5th (-want +got):\n%s", diff)
	}
	finish("seventh", false) // bash-7
	if diff := cmp.Diff([]string{running.ID, pending, "bash-6", "bash-7"}, ids()); diff != "" {
		t.Fatalf("after the 6th (-want +got):\n%s", diff)
	}
	// Every settled task owes its notice now: the oldest is forgotten and
	// its notice dropped; the others still come.
	finish("eighth", false) // bash-8
	if diff := cmp.Diff([]string{running.ID, "bash-6", "bash-7", "bash-8"}, ids()); diff != "" {
		t.Fatalf("after the 7th (-want +got):\n%s", diff)
	}
	want := []string{
		"bash-6 sixth [status: completed, exit code: 0] | sixth",
		"bash-7 seventh [status: completed, exit code: 0] | seventh",
		"bash-8 eighth [status: completed, exit code: 0] | eighth",
	}
	if diff := cmp.Diff(want, noticeLines(r.Notices("a"))); diff != "" {
		t.Fatalf("notices (-want +got):\n%s", diff)
	}
	if info := must(r.Get("a", running.ID)); info.Status != StatusRunning {
		t.Fatalf("the running task: %+v", info)
	}
}

// TestForgottenTaskIsReleased: once forgotten, nothing of the runtime
// keeps a task's Handle (and so the output it holds) alive.
func TestForgottenTaskIsReleased(t *testing.T) {
	r := newRuntime(t, &Options{MaxFinished: 1})
	var handles []weak.Pointer[handle]
	for range 3 {
		h := newHandle()
		info, err := r.Start("a", "bash", "x", func() (Handle, error) { return h, nil })
		if err != nil {
			t.Fatal(err)
		}
		h.emit(strings.Repeat("x", 1<<20))
		h.finish(exit0)
		settle(t, r, "a", info.ID)
		r.Read("a", info.ID)
		handles = append(handles, weak.Make(h))
	}
	runtime.GC()
	runtime.GC()
	for i, w := range handles[:2] {
		if w.Value() != nil {
			t.Errorf("the handle of forgotten task %d is still reachable", i+1)
		}
	}
	if handles[2].Value() == nil {
		t.Error("the handle of the task still kept was freed")
	}
}

// TestUnknownTaskListsYours: an unknown id names the caller's ids, newest
// first, at most maxListedIDs of them; never another owner's.
func TestUnknownTaskListsYours(t *testing.T) {
	r := newRuntime(t, &Options{MaxPerSession: 20})
	startKillable(t, r, "b", "bash", "b") // bash-1, another owner's
	var want []string
	for i := range 12 {
		_, info := startKillable(t, r, "a", "bash", "a"+strconv.Itoa(i))
		want = append([]string{info.ID}, want...)
	}
	_, err := r.Get("a", "bash-99")
	if got, w := err.Error(), "unknown task bash-99; your tasks: "+strings.Join(want[:maxListedIDs], ", "); got != w {
		t.Errorf("err = %q, want %q", got, w)
	}
	if _, err := r.Get("c", "bash-99"); err.Error() != "unknown task bash-99; you have no background tasks" {
		t.Errorf("err = %q", err)
	}
}

// TestNoticeShowsUnreadOutputWithoutConsumingIt: a notice carries the
// last lines of the output its owner has not read; the next Read still
// returns all of that output.
func TestNoticeShowsUnreadOutputWithoutConsumingIt(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "x")
	h.emit("read already\n")
	r.Read("a", info.ID)
	var out strings.Builder
	for i := 1; i <= 8; i++ {
		out.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	h.emit(out.String())
	h.finish(exit3)
	settle(t, r, "a", info.ID)
	ns := r.Notices("a")
	if len(ns) != 1 || ns[0].LastOutput != "line 4\nline 5\nline 6\nline 7\nline 8" || ns[0].Outcome.StatusLine() != "[status: completed, exit code: 3]" {
		t.Fatalf("notices = %+v", ns)
	}
	if d, _, _ := r.Read("a", info.ID); d != out.String() {
		t.Fatalf("Read after the notice = %q, want %q", d, out.String())
	}
}

// TestElapsed: a running task's elapsed time grows; a settled one's is
// its run time and stays.
// It runs in a synctest bubble, whose clock makes the times exact.
func TestElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRuntime(t, nil)
		h, info := startManual(t, r, "a", "bash", "x")
		time.Sleep(30 * time.Millisecond)
		if e := must(r.Get("a", info.ID)).Elapsed; e != 30*time.Millisecond {
			t.Fatalf("running elapsed %v, want 30ms", e)
		}
		h.finish(exit0)
		settled := settle(t, r, "a", info.ID).Elapsed
		time.Sleep(30 * time.Millisecond)
		if e := must(r.Get("a", info.ID)).Elapsed; e != settled || e != 30*time.Millisecond {
			t.Fatalf("settled elapsed %v, then %v, want 30ms", settled, e)
		}
	})
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n, b int
		want string
	}{
		{"", 5, 500, ""},
		{"\n\n", 5, 500, ""},
		{"one", 5, 500, "one"},
		{"a\nb\nc\n", 5, 500, "a\nb\nc"},
		{"1\n2\n3\n4\n5\n6\n7\n", 5, 500, "3\n4\n5\n6\n7"},
		{"1\n2\n3\n4\n5\n6\n7", 5, 500, "3\n4\n5\n6\n7"},
		{"\nx\n", 5, 500, "x"},
		{"aaaa\nbbbb\ncccc\n", 5, 9, "bbbb\ncccc"},   // exactly the bytes
		{"aaaa\nbbbb\ncccc\n", 5, 8, "cccc"},         // cut after a newline
		{"0123456789", 5, 4, "6789"},                 // a long line: the end of it
		{"\u00e9\u00e9\u00e9\u00e9", 5, 3, "\u00e9"}, // never a broken character
		{"x\n\u00e9\u00e9\u00e9\u00e9", 5, 7, "\u00e9\u00e9\u00e9"},
	} {
		if got := lastLines(c.in, c.n, c.b); got != c.want {
			t.Errorf("lastLines(%q, %d, %d) = %q, want %q", c.in, c.n, c.b, got, c.want)
		}
	}
}

// FuzzLastLines: whatever the text, the result is a suffix of it, valid
// UTF-8 when the text is, within the byte bound, at most n lines, and
// without a final newline.
func FuzzLastLines(f *testing.F) {
	f.Add("a\nb\nc\n", 5, 500)
	f.Add("\u00e9\u00e9\u00e9", 1, 3)
	f.Add("\n\n\nx", 2, 1)
	f.Fuzz(func(t *testing.T, text string, n, maxBytes int) {
		n, maxBytes = n%20, maxBytes%1000
		if n < 1 || maxBytes < 0 {
			t.Skip()
		}
		got := lastLines(text, n, maxBytes)
		if !strings.HasSuffix(strings.TrimRight(text, "\n"), got) || len(got) > maxBytes ||
			strings.Count(got, "\n") >= n || strings.HasSuffix(got, "\n") ||
			utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("lastLines(%q, %d, %d) = %q", text, n, maxBytes, got)
		}
	})
}

// TestForgottenBeforeTheTable: a task its owner forgot is unknown to
// every call at once, also in the moment before its id leaves the
// runtime's table (the owner's lock, then the runtime's).
func TestForgottenBeforeTheTable(t *testing.T) {
	r := newRuntime(t, nil)
	h, info := startManual(t, r, "a", "bash", "forgotten")
	h.finish(exit0)
	settle(t, r, "a", info.ID)
	r.mu.RLock()
	tk := r.ids[info.ID]
	r.mu.RUnlock()
	tk.owner.mu.Lock()
	tk.forgotten = true // as forgetOldestLocked leaves it, still in r.ids
	tk.owner.mu.Unlock()
	var unknown *UnknownTaskError
	if _, _, err := r.Read("a", info.ID); !errors.As(err, &unknown) {
		t.Fatalf("Read: %v, want unknown task", err)
	}
	if _, _, err := r.Kill("a", info.ID, "test"); !errors.As(err, &unknown) {
		t.Fatalf("Kill: %v, want unknown task", err)
	}
}
