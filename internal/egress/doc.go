// Package egress is a session's only way out to the network under a
// filtered network policy (public or allowlist; docs/sandbox.md#network).
//
// The session's init has a network namespace of its own whose one
// interface is a TUN device; the init hands the device to the server,
// where a Session runs gVisor's user-space TCP/IP stack on it. Every
// connection a command opens ends in that stack, and the Session decides
// it by the policy (package netpolicy) before it completes the handshake:
// refused connections are reset and recorded, allowed ones are made
// again by the server with its own sockets and spliced. The Session also
// answers every DNS query of the namespace (port 53, whatever the
// address), with addresses of its own that stand for names
// (198.18.0.0/15), so that a connection is decided by the name the
// command asked for, whatever protocol it speaks; the server resolves
// the name itself when it dials, and refuses what it resolves to when
// that is a refused address (DNS rebinding).
package egress
