// Package acp draws conch's tool calls as Agent Client Protocol cards, and
// serves conch as an ACP agent for editors (conch acp).
//
// # The bridge
//
// A Bridge turns the views of tools.PresentCall and tools.PresentResult
// into the session/update notifications of docs/presentation.md#acp-terminal-cards, as values of
// github.com/coder/acp-go-sdk, so that a Go program that already speaks
// ACP can draw conch's tools with it alone:
//
//	b := acp.NewBridge(acp.Snapshot{
//		Terminal: acp.TerminalOutput(initReq.ClientCapabilities),
//		Cwd:      sessionCwd,
//	})
//	conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: b.Call(id, "bash", args)})
//	r := toolset.Call(ctx, tools.Session{ID: string(sid), Cwd: sessionCwd}, "bash", args, nil)
//	conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: sid, Update: b.Result(id, "bash", args, []string{r.Text}, r.IsError)})
//
// One Bridge per session: it carries the session's Snapshot, taken when
// the session is created or loaded, so that a call and its result are
// drawn alike even if the client initializes again in between.
//
// A foreground bash call is a terminal card when the client opted in with
// clientCapabilities._meta.terminal_output === true:
//
//	tool_call        {toolCallId, title:<command>, kind:"execute", status:"in_progress", rawInput:<command>,
//	                  content:[{type:"content", content:{type:"text", text:<description>}},
//	                           {type:"terminal", terminalId:<toolCallId>}],
//	                  _meta:{terminal_info:{terminal_id:<toolCallId>, cwd:<absolute cwd>}}}
//	tool_call_update {toolCallId, status:"completed"|"failed",
//	                  _meta:{terminal_output:{terminal_id, data:<output>},
//	                         terminal_exit:{terminal_id, exit_code:<N>} | {terminal_id, signal:<SIG>}}}
//
// The result has no content: it would replace the terminal block. Without
// the capability the call has neither the terminal block nor _meta, and
// the result's content is the output in a ```console block. Background
// calls, the task tools and error results are generic cards with text
// content. A terminal result for a call the bridge did not draw as a
// terminal is sent as text (the orphan guard). The status is failed for an
// error result and for a command that exited non-zero or was killed by a
// signal, completed otherwise.
//
// While the command runs, a caller may feed its card live: set
// tools.CallOptions.Output, send Bridge.LiveOutput(id, data) for each
// report that is not final, and draw the result with Bridge.ResultCard,
// passing the final report's data (the rest of the output); to replay the
// card, pass everything the card received. The Agent does this for every
// foreground command, and records the card's content with the result.
//
// # The agent
//
// An Agent is an ACP agent whose model is the user: each prompt is one
// shell command, run through the bash tool of its session and drawn as its
// card. A prompt starting with & runs in the background, one starting
// with /tty runs on a terminal (bash's tty); /tasks, /output <id>,
// /input <id> <text> and /kill <id> call task_list, task_output,
// task_input (the text, then Enter) and task_kill. A blank prompt and
// /help get the help text (HelpText), /output, /input or /kill without an
// id and /tty without a command a usage line, and an unknown /word (a slash and a name:
// a word with a second slash is a path, and runs) the help text after
// "Unknown command `/word`."; none of them runs anything. Completion
// notices of background tasks follow a result as an agent message, or,
// when the session is idle, are sent as soon as the task ends (wire
// Agent.Notify as the task runtime's OnNotice hook); their hint names the
// command to type ("Read its output with `/output bash-1`."), not the
// task_output tool.
//
// It answers initialize (protocol version 1, loadSession); session/new
// and session/load, refusing with invalid params (-32602) a cwd that is
// not an absolute path to an existing folder; session/prompt (end_turn);
// and session/cancel. session/load replays a recorded session through the
// same presenters with the loading session's snapshot. Other methods get
// "Method not found" (-32601), an unknown session "Resource not found"
// (-32002), and an input line that is not a JSON-RPC message a parse or
// invalid-request error, with the request's id when it has a valid one (a
// string, an integer or null), else a null id.
//
// A session runs one prompt at a time. A prompt sent while another of its
// session runs is queued and runs once the earlier ones have returned, in
// the order sent, each with its own answer. (The input reader holds it
// back: the ACP SDK would cancel the running prompt as the next one
// reached it. The SDK writes a prompt's answer after the agent returned
// it, so the next prompt's first updates may come before that answer.)
// session/cancel kills the running command, whose card keeps what it had
// printed and the signal that ended it, and its prompt answers cancelled;
// the prompts queued behind it answer cancelled too, without running. A
// cancel applies to every prompt of the session read before it, and to
// none read after it. At the end of input, the queued prompts answer
// cancelled.
//
// Sessions are recorded as JSON Lines, one file per session
// (AgentOptions.SessionDir/<id>.jsonl): each record is written whole by
// one write and synced, so a crash can cut at most the last line, and a
// load skips (and logs) any line it cannot read. A line left partial (by
// a crash, or a write that failed part way) is ended before the next
// record is appended, so it never spoils a later record. Only a regular
// file is a session file: a symbolic link in the sessions folder is not
// followed, and a link, a FIFO, a device, a folder or a file over 128 MiB
// in a session file's place is refused at once, the session/load failing
// with an internal error (-32603) whose data names the file.
package acp
