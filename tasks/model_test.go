package tasks

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// modelTask is what the runtime should know about one task.
type modelTask struct {
	id, owner, label string
	h                *handle
	status           Status
	outcome          Outcome
	killRequested    bool
	collected        bool
	unread           string
}

// TestModel drives a Runtime with random operations of two owners and
// compares every answer with a plain sequential model of the contract.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const limit = 3
		owners := []string{"a", "b"}
		r := New(&Options{MaxPerSession: limit})
		var handles []*handle
		defer func() {
			for _, h := range handles {
				h.finish(sigterm)
			}
			r.Close()
		}()

		counter := 0
		live := map[string][]*modelTask{} // per owner, start order
		notices := map[string][]*modelTask{}
		active := func(owner string) int {
			n := 0
			for _, m := range live[owner] {
				if !m.status.Settled() {
					n++
				}
			}
			return n
		}
		all := func() []*modelTask {
			var out []*modelTask
			for _, o := range owners {
				out = append(out, live[o]...)
			}
			return out
		}
		pick := func(rt *rapid.T, filter func(*modelTask) bool) *modelTask {
			var c []*modelTask
			for _, m := range all() {
				if filter(m) {
					c = append(c, m)
				}
			}
			if len(c) == 0 {
				rt.Skip("no candidate")
			}
			return rapid.SampledFrom(c).Draw(rt, "task")
		}
		expectInfo := func(rt *rapid.T, m *modelTask, got Info) {
			want := Info{ID: m.id, Kind: "bash", Label: m.label, Owner: m.owner, Status: m.status, Outcome: m.outcome,
				Started: got.Started, Elapsed: got.Elapsed, Written: int64(len(m.h.all()))}
			if !m.status.Settled() {
				want.Outcome = Outcome{Status: m.status}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				rt.Fatalf("info of %s (-want +got):\n%s", m.id, diff)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				for _, o := range owners {
					got := r.List(o)
					if len(got) != len(live[o]) {
						rt.Fatalf("List(%s) has %d tasks, model %d", o, len(got), len(live[o]))
					}
					for i, m := range live[o] {
						expectInfo(rt, m, got[i])
					}
				}
			},
			"start": func(rt *rapid.T) {
				owner := rapid.SampledFrom(owners).Draw(rt, "owner")
				h := newHandle()
				handles = append(handles, h)
				label := "cmd " + strconv.Itoa(len(handles))
				info, err := r.Start(owner, "bash", label, func() (Handle, error) { return h, nil })
				if active(owner) >= limit {
					if !errors.As(err, new(*LimitError)) {
						rt.Fatalf("Start over the limit: %+v, %v", info, err)
					}
					return
				}
				if err != nil {
					rt.Fatalf("Start: %v", err)
				}
				counter++
				m := &modelTask{id: "bash-" + strconv.Itoa(counter), owner: owner, label: label, h: h, status: StatusRunning}
				live[owner] = append(live[owner], m)
				expectInfo(rt, m, info)
			},
			"emit": func(rt *rapid.T) {
				m := pick(rt, func(m *modelTask) bool { return !m.status.Settled() })
				s := rapid.StringMatching(`[a-z\n]{1,8}`).Draw(rt, "output")
				m.h.emit(s)
				m.unread += s
			},
			"finish": func(rt *rapid.T) {
				m := pick(rt, func(m *modelTask) bool { return !m.status.Settled() })
				out := rapid.SampledFrom([]Outcome{exit0, exit3, sigterm}).Draw(rt, "outcome")
				m.h.finish(out)
				got, err := r.Wait(rt.Context(), m.owner, m.id, 10*time.Second)
				if err != nil || !got.Status.Settled() {
					rt.Fatalf("Wait %s: %+v, %v", m.id, got, err)
				}
				m.status, m.outcome = out.Status, out
				if !m.killRequested && !m.collected {
					notices[m.owner] = append(notices[m.owner], m)
				}
				expectInfo(rt, m, got)
			},
			"kill": func(rt *rapid.T) {
				m := pick(rt, func(*modelTask) bool { return true })
				caller := rapid.SampledFrom(owners).Draw(rt, "caller")
				reasons := len(m.h.cancelReasons())
				got, already, err := r.Kill(caller, m.id, "model")
				if caller != m.owner {
					if !errors.As(err, new(*ForeignTaskError)) {
						rt.Fatalf("foreign Kill: %v", err)
					}
					return
				}
				if err != nil {
					rt.Fatalf("Kill: %v", err)
				}
				wantReasons := reasons
				switch m.status {
				case StatusRunning:
					m.status, m.killRequested = StatusStopping, true
					wantReasons++
				case StatusStopping:
				default:
					if !already {
						rt.Fatalf("Kill of settled %s: alreadyFinished false", m.id)
					}
				}
				if already != m.status.Settled() {
					rt.Fatalf("Kill %s: alreadyFinished %v for %s", m.id, already, m.status)
				}
				if n := len(m.h.cancelReasons()); n != wantReasons {
					rt.Fatalf("Kill %s: %d cancels, want %d", m.id, n, wantReasons)
				}
				expectInfo(rt, m, got)
			},
			"read": func(rt *rapid.T) {
				m := pick(rt, func(*modelTask) bool { return true })
				caller := rapid.SampledFrom(owners).Draw(rt, "caller")
				delta, got, err := r.Read(caller, m.id)
				if caller != m.owner {
					if !errors.As(err, new(*ForeignTaskError)) {
						rt.Fatalf("foreign Read: %v", err)
					}
					return
				}
				if err != nil || delta != m.unread {
					rt.Fatalf("Read %s = %q, %v; want %q", m.id, delta, err, m.unread)
				}
				m.unread = ""
				if m.status.Settled() {
					m.collected = true
				}
				expectInfo(rt, m, got)
			},
			"read unknown": func(rt *rapid.T) {
				id := "bash-" + strconv.Itoa(counter+1+rapid.IntRange(0, 3).Draw(rt, "n"))
				if _, _, err := r.Read(rapid.SampledFrom(owners).Draw(rt, "caller"), id); !errors.As(err, new(*UnknownTaskError)) {
					rt.Fatalf("Read of unknown %s: %v", id, err)
				}
			},
			"notices": func(rt *rapid.T) {
				owner := rapid.SampledFrom(owners).Draw(rt, "owner")
				type notice struct {
					ID, Label, Status, Last string
				}
				var want, got []notice
				for _, m := range notices[owner] {
					if !m.collected {
						want = append(want, notice{m.id, m.label, m.outcome.StatusLine(), lastLines(m.h.Peek(NoticeBytes), NoticeLines, NoticeBytes)})
					}
				}
				notices[owner] = nil
				for _, n := range r.Notices(owner) {
					got = append(got, notice{n.ID, n.Label, n.Outcome.StatusLine(), n.LastOutput})
				}
				if diff := cmp.Diff(want, got); diff != "" {
					rt.Fatalf("Notices(%s) (-want +got):\n%s", owner, diff)
				}
			},
			"dispose": func(rt *rapid.T) {
				owner := rapid.SampledFrom(owners).Draw(rt, "owner")
				before := map[*modelTask]int{}
				for _, m := range live[owner] {
					before[m] = len(m.h.cancelReasons())
					if !m.status.Settled() {
						stopOnCancel(m.h, 0)
					}
				}
				r.Dispose(owner)
				for _, m := range live[owner] {
					reasons := m.h.cancelReasons()
					want := before[m]
					if m.status == StatusRunning {
						want++
						if reasons[len(reasons)-1] != "owner disposed" {
							rt.Fatalf("%s cancelled with %q", m.id, reasons)
						}
					}
					if len(reasons) != want {
						rt.Fatalf("%s: cancel reasons %q, want %d", m.id, reasons, want)
					}
					if _, err := r.Get(owner, m.id); !errors.As(err, new(*UnknownTaskError)) {
						rt.Fatalf("Get of disposed %s: %v", m.id, err)
					}
				}
				live[owner] = nil
				notices[owner] = nil
				if got := r.Notices(owner); got != nil {
					rt.Fatalf("notices after Dispose: %+v", got)
				}
				handles = slices.DeleteFunc(handles, func(h *handle) bool {
					select {
					case <-h.Done():
						return true
					default:
						return false
					}
				})
			},
		})
	})
}
