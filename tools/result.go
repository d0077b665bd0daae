package tools

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/conch-dev/conch/tasks"
)

// A result leaves Call whole: the completion notices that ride with it,
// its structured value's Text (the result's text, then each notice after
// a blank line), and the result budget (Options.MaxResultBytes) held by
// the value as it is sent, JSON-encoded. Hosts such as Claude Code and
// Codex hand a model only that value; others show the text blocks, which
// say the same words and are never longer (docs/tools.md, "One result
// for every host").

// deliver completes r, the result of one call of session. render, when
// set, renders a command's output within a budget: it is called with a
// smaller budget until the value fits. notices are the session's pending
// completion notices: those that fit in half the budget ride with r (the
// first always does), the others wait for the session's next result. A
// notice about a task r read to its end is dropped: the model reads the
// task now. A tool error has no structured value, so no "text" to carry
// a notice in: its notices wait too.
func (t *Toolset) deliver(session string, r Result, render func(int) Result, notices []Notice) Result {
	limit := t.opts.MaxResultBytes
	if render == nil {
		notices = withoutCollected(r, notices)
		if r.IsError {
			t.deferred.push(session, notices)
			return r
		}
	}
	ride, later := fitNotices(notices, limit/2)
	for {
		if render != nil {
			r = t.renderWithin(render, ride)
		}
		v, ok := r.Value.(texted)
		if r.IsError || !ok {
			later, ride = append(ride, later...), nil
			break
		}
		text := withNotices(r.Text, ride)
		if len(ride) == 0 || encodedSize(v, text) <= limit {
			r.Value = v.withText(text)
			break
		}
		// The facts alone leave no room for the last notice: it waits.
		later = append([]Notice{ride[len(ride)-1]}, later...)
		ride = ride[:len(ride)-1]
	}
	r.Notices = ride
	t.deferred.push(session, later)
	return r
}

// renderWithin renders a command's result so that its value, with the
// notices ride, fits the result budget: the text gets the budget less the
// notices, but at least half of it (a burst of notices cannot crowd out
// the command's own output), and then less by what the value's other
// members take, until it fits or the text's budget is down to
// MinResultBytes/2.
func (t *Toolset) renderWithin(render func(int) Result, ride []Notice) Result {
	limit := t.opts.MaxResultBytes
	budget := max(limit-noticesLen(ride), limit/2)
	for {
		r := render(budget)
		v, ok := r.Value.(texted)
		if r.IsError || !ok {
			return r
		}
		over := encodedSize(v, withNotices(r.Text, ride)) - limit
		if over <= 0 || budget <= MinResultBytes/2 {
			return r
		}
		budget = max(budget-over, MinResultBytes/2)
	}
}

// encodedSize is the size of v with Text set to text, JSON-encoded as
// the MCP SDK sends it (json.Marshal): its other members, and text as
// encodedLen counts it.
func encodedSize(v texted, text string) int {
	b, err := json.Marshal(v.withText(""))
	if err != nil { // cannot happen for the tools' values
		return 0
	}
	return len(b) + encodedLen(text)
}

// fitNotices splits notices into those whose texts, each after a blank
// line, encode to at most room bytes together (the first always rides:
// a notice cannot wait forever) and the rest, in order.
func fitNotices(notices []Notice, room int) (ride, later []Notice) {
	used := 0
	for i, n := range notices {
		used += encodedLen("\n\n" + n.Text)
		if i > 0 && used > room {
			return notices[:i], notices[i:]
		}
	}
	return notices, nil
}

// noticesLen is what notices add to a text, encoded, at most.
func noticesLen(notices []Notice) int {
	n := 0
	for _, x := range notices {
		n += encodedLen("\n\n" + x.Text)
	}
	return n
}

// withoutCollected is notices without those about the task that r, a
// task_output or task_input result, read to its end.
func withoutCollected(r Result, notices []Notice) []Notice {
	v, ok := r.Value.(TaskOutputValue)
	if !ok || !tasks.Status(v.Status).Settled() {
		return notices
	}
	return slices.DeleteFunc(slices.Clone(notices), func(n Notice) bool { return n.TaskID == v.TaskID })
}

// Requeue gives back notices of a result that never reached its model
// (a call its client cancelled): they ride on the session's next result,
// before newer ones.
func (t *Toolset) Requeue(session string, notices []Notice) {
	t.deferred.push(session, notices)
}

// noticeQueue holds, per session, the notices that did not ride with a
// result, to go out first with the next one.
type noticeQueue struct {
	mu sync.Mutex
	m  map[string][]Notice
}

// push puts notices in front of those session already waits with: they
// were drained before them.
func (q *noticeQueue) push(session string, notices []Notice) {
	if len(notices) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = make(map[string][]Notice)
	}
	q.m[session] = append(slices.Clone(notices), q.m[session]...)
}

// take drains session's waiting notices.
func (q *noticeQueue) take(session string) []Notice {
	q.mu.Lock()
	defer q.mu.Unlock()
	ns := q.m[session]
	delete(q.m, session)
	return ns
}
