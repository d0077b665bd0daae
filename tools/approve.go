package tools

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/conch-dev/conch/ops"
	"github.com/conch-dev/conch/rules"
	"github.com/conch-dev/conch/shell"
)

// Texts of a command the rules stop (tool errors, so "Error: " comes
// first).
const (
	msgDeniedFmt   = "denied by rule %s: %s"
	msgDeclinedFmt = "not run: the user declined %s"
	msgCannotAsk   = "not run: %s needs approval (%s), but this client cannot ask the user; allow it in the conch configuration or run it yourself"
	msgNoAnswer    = "not run: no answer from the user"
	// msgUnansweredFmt: the client answered the question with cancel
	// without showing it to anyone (Claude Code -p and codex exec answer
	// every question so, in milliseconds): no one declined anything.
	msgUnansweredFmt = "not run: the question was not answered (cancel); %s"
)

// DefaultApprovalTimeout is how long a question to the user stays open.
const DefaultApprovalTimeout = 10 * time.Minute

// maxSessionRules bounds what one session remembers: a session answering
// "for this session" forever must not grow the server without limit.
const maxSessionRules = 100

// Answer is the user's answer to a Question.
type Answer int

const (
	// Declined: the user said no. The call fails with "not run: the user
	// declined <subject>".
	Declined Answer = iota
	// AllowOnce runs this call's command line.
	AllowOnce
	// AllowSession runs it and remembers SessionPrefix for the rest of
	// the session (never for another session).
	AllowSession
	// Cancelled aborts the call (ACP's cancelled outcome: the turn was
	// cancelled), with the error "tool call aborted".
	Cancelled
	// Unanswered: the client dismissed the question without an answer
	// (MCP's cancel), which clients without a user do at once. The call
	// fails with "not run: the question was not answered (cancel);
	// <subject>" rather than saying the user declined.
	Unanswered
)

// Approver asks the calling session's user about a command. A transport
// that can ask (MCP elicitation, ACP request_permission) supplies one per
// call in CallOptions.
//
// Approve blocks until the user answers or ctx ends; it returns an error
// when there is no answer (ctx ended, the client failed to ask). ctx ends
// when the call is cancelled or after Options.ApprovalTimeout.
type Approver interface {
	Approve(ctx context.Context, q Question) (Answer, error)
}

// approvals are the rules each session's user allowed for the session.
type approvals struct {
	mu    sync.Mutex
	rules map[string][]rules.Rule
}

func (a *approvals) of(session string) []rules.Rule {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rules[session]
}

// add remembers r for session; false when the session remembers too
// many already.
func (a *approvals) add(session string, r rules.Rule) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rules == nil {
		a.rules = map[string][]rules.Rule{}
	}
	if len(a.rules[session]) >= maxSessionRules {
		return false
	}
	a.rules[session] = append(a.rules[session], r)
	return true
}

func (a *approvals) forget(session string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.rules, session)
}

// permit decides a command line to run on host by Options.Rules (and
// the session's project file, see Options.Projects) before anything
// is spawned, asking the user through ap when the rules say ask. It
// returns the error result, nil when the command may run; then n is the
// narrowing of its sandbox the project file asks for (nil: none).
func (t *Toolset) permit(ctx context.Context, sess Session, line, cwd, host string, ap Approver) (n *shell.SandboxNarrowing, fail *Result) {
	r, n, err := t.projectFor(sess, line, host)
	if err != nil {
		return nil, failure(fmt.Sprintf(msgProjectFmt, err))
	}
	return n, t.decide(ctx, sess, r, line, cwd, ap)
}

// decide decides line by r, asking the user through ap when r says ask;
// nil when the command may run, else the error result.
func (t *Toolset) decide(ctx context.Context, sess Session, r *rules.Rules, line, cwd string, ap Approver) *Result {
	if r == nil {
		return nil
	}
	rctx, end := t.start(ctx, ops.PhaseRules)
	d := r.Check(line)
	// Each "for this session" answer lifts one ask; a line with several
	// asks goes on to the next.
	for {
		d = d.Allowing(t.approved.of(sess.ID))
		subject := d.Command
		if subject == "" {
			subject = line
		}
		t.record(rctx, ops.Decision{Owner: sess.ID, CallID: ops.CallIDFrom(ctx), Decision: d.Verdict.String(), Rule: d.Rule, Command: d.Command, Reason: d.Reason})
		if end != nil {
			end() // the rules' check; a question is the call's next phase
			end, rctx = nil, ctx
		}
		switch d.Verdict {
		case rules.Allow:
			return nil
		case rules.Deny:
			return failure(fmt.Sprintf(msgDeniedFmt, d.Rule, subject))
		}
		if ap == nil {
			return failure(fmt.Sprintf(msgCannotAsk, subject, d.Why()))
		}
		q := Question{Kind: AskRule, Command: line, Cwd: cwd, Subject: subject, Reason: d.Why()}
		sessionRule, remember := d.SessionRule()
		if remember {
			q.SessionPrefix = sessionRule.Pattern()
		}
		a, err := t.ask(ctx, sess, ap, q, "rule", subject)
		switch {
		case err != nil:
			return failure(msgNoAnswer)
		case a == AllowOnce, a == AllowSession && !(remember && t.approved.add(sess.ID, sessionRule)):
			return nil
		case a == AllowSession: // remembered: decide the line again
			t.grant(ctx, sess, "rule", q.SessionPrefix, "session")
		case a == Cancelled:
			return failure(msgAborted)
		case a == Unanswered:
			return failure(fmt.Sprintf(msgUnansweredFmt, subject))
		default:
			return failure(fmt.Sprintf(msgDeclinedFmt, subject))
		}
	}
}

func failure(msg string) *Result {
	r := errorResult(msg)
	return &r
}
