package shell

import "context"

// NetworkAnswer is a user's answer to a network question
// (docs/sandbox.md#network): `Allow network access to <host> for this
// session?`.
type NetworkAnswer int

const (
	// NetworkDeny refuses the connection, and the host for the rest of
	// the session.
	NetworkDeny NetworkAnswer = iota
	// NetworkAllowOnce lets this connection through (`Allow <host>:<port>
	// once`).
	NetworkAllowOnce
	// NetworkAllowSession lets the host through for the rest of the
	// session (`Allow <host> for this session`).
	NetworkAllowSession
)

// NetworkAsker asks a session's user whether its commands may reach
// host on port, for a provider whose network policy asks about a
// destination it does not list. AskNetwork blocks until the user answers
// or ctx ends; an error means no answer (the connection is refused).
type NetworkAsker interface {
	AskNetwork(ctx context.Context, host string, port int) (NetworkAnswer, error)
}

// NetworkAskers is implemented by an executor whose network policy can
// ask the user. The tool layer lends it the asker of each call while the
// call runs (its transport's way of asking: MCP elicitation, ACP's
// permission request); a connection made while no call of the owner is
// in flight (a background task's) finds no one to ask and is refused.
// release ends the loan; loans of one owner stack, the latest answering.
type NetworkAskers interface {
	LendNetworkAsker(owner string, a NetworkAsker) (release func())
}
