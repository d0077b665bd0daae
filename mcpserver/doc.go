// Package mcpserver serves conch's tools over MCP (stdio and streamable HTTP) with the official Go SDK.
//
// Make a Server with New over a tools.Toolset, then serve it with
// Server.ServeStdio or mount Server.HTTPHandler (see Example).
//
// # Tools
//
// Every tool of a [tools.Toolset] is registered with the SDK's raw form, so
// the arguments reach the toolset untouched and its validation messages
// reach the model byte for byte. Schemas are the toolset's own JSON bytes
// (property order included), and tools/list returns the tools in the
// toolset's order (the SDK would sort them by name). A result is one text
// block with the model-facing text, then one more text block per
// completion notice of the session's background tasks (a notice drained
// by a call the client cancelled, whose result it drops, goes with the
// session's next result instead); the structured value travels as
// structuredContent; tool errors set isError.
//
// # Sessions
//
// conch speaks the protocol versions that open a session with initialize
// (up to 2025-11-25): its sessions, their cwd from roots and the
// keep-alive rest on them, and 2026-07-28 has none.
//
// A session owns background tasks (its id is the task owner and the
// command's CONCH_SESSION_ID) and has a working directory. Stdio is one
// session, "stdio" (further concurrent ServeStdio calls get "stdio-2", …).
// Each streamable HTTP session (one Mcp-Session-Id) is its own session,
// "http-1", "http-2", … — the protocol's session id, which acts as a
// capability, never reaches commands.
//
// The working directory of a session is the first file:// root of a
// client that declared the roots capability, asked for on the first bash
// call (bounded by Options.RootsTimeout) and again after the client says
// its roots changed; otherwise, or if that root is not a directory, it is
// the executor's default (conch serve --cwd).
//
// A session ends when the client closes it (stdin EOF, HTTP DELETE), when
// an HTTP session has no request in flight and no event stream open for
// Options.SessionTimeout, when a client holding an event stream fails two
// keep-alive pings in a row, when a client that held one lost it and then
// for two keep-alive intervals neither re-opened it nor sent any request
// (it left without a DELETE, or died; a client that never opened a stream
// cannot be pinged and is left to the idle timeout), or when the Server
// closes. The end cancels the session's running calls at once (the
// SDK alone would wait for them), which kills their process groups, and
// then disposes of the session's background tasks.
//
// # Calls
//
// The client's notifications/cancelled cancels the call: the process group
// is killed, and the call gets no response, as the protocol asks (the SDK
// would answer "tool call aborted", which clients report as a response to
// an unknown request). When the client
// sent a progress token, a running foreground command reports progress at
// most once a second (progress = elapsed seconds; the message gives the
// elapsed time, the bytes of output so far and the last line printed).
//
// # Bad input on stdio
//
// A stdio line that is not one JSON-RPC 2.0 message is answered with an
// error whose id is null, and the session goes on (the SDK alone would end
// it without a word): -32700 (Parse error) for a line that is not JSON,
// -32600 (Invalid Request) for any other JSON value, a batch array
// included, and for a line over 16 MiB, which is discarded as it streams
// in rather than held in memory. Blank lines are skipped.
//
// # HTTP safety
//
// [Server.HTTPHandler] checks, before the SDK sees a request: the bearer
// token (Options.Token), on every request, loopback included, for other
// users of the machine reach loopback too (without a Token every request
// is refused); the Host header of requests that arrived on a loopback
// address (DNS rebinding); and cross-origin browser requests
// ([http.CrossOriginProtection]). A refused request runs nothing. A POST
// body must arrive within Options.BodyTimeout and hold at most 4 MiB.
// [Server.Serve] adds the header and idle timeouts and holds at most
// Options.MaxConns connections at once, so that slow or flooding clients
// cannot exhaust the server's descriptors; when they are all taken, a
// connection that sends its headers too slowly (or nothing, or sits
// idle) gives up its place to a newcomer, so that a slowloris cannot
// lock legitimate clients out.
//
// Whatever answers a POST is JSON-RPC: a method the server does not know
// gets -32601 (Method not found), and the transport's refusals (401, 403,
// 404, 413, …) keep their HTTP status with a JSON-RPC error body (-32700
// for a body that is not JSON, else -32600) rather than plain text. A call
// that the client cancelled while it ran gets no response: the event that
// would carry it is dropped from the call's stream.
package mcpserver
