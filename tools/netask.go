package tools

import (
	"context"
	"net"
	"strconv"

	"github.com/conch-dev/conch/shell"
)

// NetworkQuestion is the question a network policy in allowlist mode
// asks about a destination it does not list (docs/sandbox.md#network):
// `Allow network access to <host> for this session?`, with the choices
// `Allow <host> for this session`, `Allow <host>:<port> once` and `Deny`.
type NetworkQuestion struct {
	Host string
	Port int
}

func (n *NetworkQuestion) message() string {
	return "Allow network access to " + n.Host + " for this session?"
}

func (n *NetworkQuestion) sessionChoice() string { return "Allow " + n.Host + " for this session" }

func (n *NetworkQuestion) onceChoice() string {
	return "Allow " + net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) + " once"
}

// OnceChoice is the label of the choice that allows this once:
// ChoiceOnce, or for a network question `Allow <host>:<port> once`.
func (q Question) OnceChoice() string {
	if q.Network != nil {
		return q.Network.onceChoice()
	}
	return ChoiceOnce
}

// Choices are the labels a transport offers, in order: OnceChoice,
// SessionChoice (when not ""), ChoiceDeny; for a network question the
// session choice comes first.
func (q Question) Choices() []string {
	if q.Network != nil {
		return []string{q.SessionChoice(), q.OnceChoice(), ChoiceDeny}
	}
	out := []string{ChoiceOnce}
	if c := q.SessionChoice(); c != "" {
		out = append(out, c)
	}
	return append(out, ChoiceDeny)
}

// lendNetworkAsker lends ap, the call's way of asking its user, to the
// executor of on while the call runs, so that its network policy can ask
// about a connection a command of the call makes; the returned func ends
// the loan. Without ap (the client cannot ask) nothing is lent, and such
// a connection is refused.
func (t *Toolset) lendNetworkAsker(ctx context.Context, sess Session, on target, ap Approver) (release func()) {
	l, ok := on.ex.(shell.NetworkAskers)
	if !ok || ap == nil {
		return func() {}
	}
	return l.LendNetworkAsker(sess.ID, networkAsker{ap: ap, t: t, sess: sess, call: ctx})
}

// networkAsker asks a network question through an Approver, recording
// it (and its answer, and a grant) as the call's.
type networkAsker struct {
	ap   Approver
	t    *Toolset
	sess Session
	call context.Context // the call's: its id and span
}

func (n networkAsker) AskNetwork(ctx context.Context, host string, port int) (shell.NetworkAnswer, error) {
	q := Question{Network: &NetworkQuestion{Host: host, Port: port}, Subject: host}
	var a Answer
	var err error
	if n.t.opts.Recorder == nil {
		a, err = n.ap.Approve(ctx, q)
	} else {
		a, err = n.t.ask(withValues(ctx, n.call), n.sess, n.ap, q, "network", joinHostPort(host, port))
	}
	switch {
	case err != nil:
		return shell.NetworkDeny, err
	case a == AllowOnce:
		n.t.grant(withValues(ctx, n.call), n.sess, "network", joinHostPort(host, port), "once")
		return shell.NetworkAllowOnce, nil
	case a == AllowSession:
		n.t.grant(withValues(ctx, n.call), n.sess, "network", joinHostPort(host, port), "session")
		return shell.NetworkAllowSession, nil
	}
	return shell.NetworkDeny, nil
}
