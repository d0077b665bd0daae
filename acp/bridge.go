package acp

import (
	"encoding/json"
	"path"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/conch-dev/conch/tools"
)

// MetaTerminalOutput is the key a client sets to true in
// clientCapabilities._meta at initialize to opt in to terminal cards.
const MetaTerminalOutput = "terminal_output"

// TerminalOutput reports whether a client opted in to terminal cards:
// clientCapabilities._meta.terminal_output is exactly true (not a truthy
// string or number).
func TerminalOutput(c sdk.ClientCapabilities) bool {
	v, ok := c.Meta[MetaTerminalOutput].(bool)
	return ok && v
}

// Snapshot is what a session fixes when it is created or loaded. A later
// initialize does not change it, so that a call and its result are always
// drawn the same way.
type Snapshot struct {
	// Terminal is the client's terminal_output capability at the time.
	Terminal bool
	// Cwd is the session's working directory, absolute. A relative
	// workdir is drawn resolved against it; "" leaves such a cwd out.
	Cwd string
	// HostCwds are the configured cwds of the remote hosts, by name
	// (tools.Toolset.HostCwds). A call on a host is drawn in
	// <host>:<cwd>, where a host without one stands for its user's home.
	HostCwds map[string]string
}

// Bridge draws the tool calls of one session as ACP session updates
// (docs/presentation.md#acp-terminal-cards). It remembers which calls it drew as terminals, so that a
// terminal result for any other call is sent as text (the orphan guard):
// a client must never receive terminal output for a terminal it was not
// told about. It is safe for concurrent use.
type Bridge struct {
	snap Snapshot

	mu        sync.Mutex
	terminals map[sdk.ToolCallId]bool // drawn as terminals, result pending
}

// NewBridge returns a bridge for a session with snapshot s.
func NewBridge(s Snapshot) *Bridge {
	return &Bridge{snap: s, terminals: make(map[sdk.ToolCallId]bool)}
}

// Snapshot returns the snapshot the bridge draws with.
func (b *Bridge) Snapshot() Snapshot { return b.snap }

// Call is the tool_call update announcing a call of tool with the model's
// raw arguments, drawn with tools.PresentCall. Arguments no presenter can
// draw give a generic card titled with the tool's name, the arguments as
// its rawInput.
func (b *Bridge) Call(id sdk.ToolCallId, tool string, args json.RawMessage) sdk.SessionUpdate {
	v, ok := tools.PresentCall(tool, args)
	if !ok {
		tc := &sdk.SessionUpdateToolCall{
			ToolCallId: id,
			Title:      tool,
			Kind:       sdk.ToolKindOther,
			Status:     sdk.ToolCallStatusInProgress,
		}
		if raw := rawInput(args); raw != nil {
			tc.RawInput = raw
		}
		return sdk.SessionUpdate{ToolCall: tc}
	}
	return b.CallView(id, v)
}

// Result is the tool_call_update carrying the result of the call id:
// texts are the result's text blocks (without completion notices),
// isError its error flag. tool and args are those of the call, drawn with
// tools.PresentResult; a result no presenter can draw gives its texts as
// text blocks.
func (b *Bridge) Result(id sdk.ToolCallId, tool string, args json.RawMessage, texts []string, isError bool) sdk.SessionUpdate {
	return b.ResultCard(id, tool, args, texts, isError, nil)
}

// ResultCard is Result for a call whose terminal card was fed live
// (LiveOutput): data, when not nil, replaces the presented output in the
// terminal_output of a call drawn as a terminal, so that the card ends up
// holding exactly what the live updates and this one carried. Live, data
// is the rest after the last live update; on replay, everything the card
// received. A card drawn any other way is drawn from texts as by Result.
func (b *Bridge) ResultCard(id sdk.ToolCallId, tool string, args json.RawMessage, texts []string, isError bool, data *string) sdk.SessionUpdate {
	v, ok := tools.PresentResult(tool, args, texts, isError)
	if !ok {
		v = tools.View{Card: tools.CardGeneric, Content: texts}
	}
	if data != nil && v.Terminal() && b.drawn(id) {
		v.Output = data
	}
	return b.ResultView(id, v, isError)
}

// LiveOutput is the tool_call_update feeding data, the output a running
// call produced since the previous one, to the terminal card of call id:
// _meta.terminal_output{terminal_id, data} alone (the status stays
// in_progress). ok is false when id is not drawn as a terminal with its
// result pending: a client never gets output for a terminal it was not
// told about.
func (b *Bridge) LiveOutput(id sdk.ToolCallId, data string) (u sdk.SessionUpdate, ok bool) {
	if !b.drawn(id) {
		return sdk.SessionUpdate{}, false
	}
	tu := &sdk.SessionToolCallUpdate{ToolCallId: id, Meta: map[string]any{
		"terminal_output": map[string]any{"terminal_id": string(id), "data": data},
	}}
	return sdk.SessionUpdate{ToolCallUpdate: tu}, true
}

// drawn reports whether id is drawn as a terminal with its result pending.
func (b *Bridge) drawn(id sdk.ToolCallId) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.terminals[id]
}

// CallView draws a call from its view (see tools.PresentCall).
//
// A terminal view, with the terminal capability: kind execute, the
// command as title and rawInput, the description as a text block followed
// by a terminal block whose id is the call's id, and
// _meta.terminal_info{terminal_id, cwd} with the cwd made absolute.
// Without the capability: the same card with no terminal block and no
// _meta. Any other view is a generic card.
func (b *Bridge) CallView(id sdk.ToolCallId, v tools.View) sdk.SessionUpdate {
	tc := &sdk.SessionUpdateToolCall{
		ToolCallId: id,
		Title:      v.Title,
		Kind:       sdk.ToolKind(v.Kind),
		Status:     sdk.ToolCallStatusInProgress,
	}
	if v.RawInput != "" {
		tc.RawInput = v.RawInput
	}
	for _, text := range v.Content {
		tc.Content = append(tc.Content, sdk.ToolContent(sdk.TextBlock(text)))
	}
	if !v.Terminal() {
		if tc.Kind == "" {
			tc.Kind = sdk.ToolKindOther
		}
		b.forget(id)
		return sdk.SessionUpdate{ToolCall: tc}
	}
	tc.Kind = sdk.ToolKindExecute
	tc.RawInput = v.Title
	tc.Content = nil
	if v.Description != "" {
		tc.Content = append(tc.Content, sdk.ToolContent(sdk.TextBlock(v.Description)))
	}
	if !b.snap.Terminal {
		b.forget(id)
		return sdk.SessionUpdate{ToolCall: tc}
	}
	tc.Content = append(tc.Content, sdk.ToolTerminalRef(string(id)))
	info := map[string]any{"terminal_id": string(id)}
	if cwd := b.terminalCwd(v); cwd != "" {
		info["cwd"] = cwd
	}
	tc.Meta = map[string]any{"terminal_info": info}
	b.mu.Lock()
	b.terminals[id] = true
	b.mu.Unlock()
	return sdk.SessionUpdate{ToolCall: tc}
}

// ResultView draws the result of the call id from its view (see
// tools.PresentResult).
//
// A terminal view for a call drawn as a terminal: status, and
// _meta.terminal_output{terminal_id, data} (data "" when the view has no
// output) and _meta.terminal_exit{terminal_id, exit_code} or
// {terminal_id, signal} (none when the view has neither), and no content,
// which would replace the terminal block. A terminal view for a call not
// drawn as a terminal (the capability is off, or the orphan guard): the
// output as a ```console block. Any other view: its content as text
// blocks.
//
// The status is failed for an error result and for a command that exited
// non-zero or was killed by a signal, completed otherwise: the card's
// status is what a person sees at a glance, and without terminal cards the
// exit marker is not in the drawn output.
func (b *Bridge) ResultView(id sdk.ToolCallId, v tools.View, isError bool) sdk.SessionUpdate {
	b.mu.Lock()
	drawn := b.terminals[id]
	delete(b.terminals, id)
	b.mu.Unlock()

	status := sdk.ToolCallStatusCompleted
	if isError || (v.Terminal() && (v.Signal != "" || (v.ExitCode != nil && *v.ExitCode != 0))) {
		status = sdk.ToolCallStatusFailed
	}
	tu := &sdk.SessionToolCallUpdate{ToolCallId: id, Status: sdk.Ptr(status)}
	if !v.Terminal() {
		for _, text := range v.Content {
			tu.Content = append(tu.Content, sdk.ToolContent(sdk.TextBlock(text)))
		}
		return sdk.SessionUpdate{ToolCallUpdate: tu}
	}
	var out string
	if v.Output != nil {
		out = *v.Output
	}
	if !drawn {
		tu.Content = []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(tools.ConsoleFence(out)))}
		return sdk.SessionUpdate{ToolCallUpdate: tu}
	}
	tid := string(id)
	tu.Meta = map[string]any{
		"terminal_output": map[string]any{"terminal_id": tid, "data": out},
	}
	switch {
	case v.Signal != "":
		tu.Meta["terminal_exit"] = map[string]any{"terminal_id": tid, "signal": v.Signal}
	case v.ExitCode != nil:
		tu.Meta["terminal_exit"] = map[string]any{"terminal_id": tid, "exit_code": *v.ExitCode}
	}
	return sdk.SessionUpdate{ToolCallUpdate: tu}
}

// forget drops id from the terminals drawn: an id drawn again as
// something else is no longer a terminal.
func (b *Bridge) forget(id sdk.ToolCallId) {
	b.mu.Lock()
	delete(b.terminals, id)
	b.mu.Unlock()
}

// terminalCwd is where the call of v runs, as the bash tool resolves its
// workdir wd: wd when absolute, else joined to the session cwd; the
// session cwd when wd is empty; "" when it cannot be known here. A call
// on a remote host runs in <host>:<dir>, dir resolved as its executor
// does: against the host's configured cwd, else its user's home (~).
func (b *Bridge) terminalCwd(v tools.View) string {
	wd := v.Cwd
	if v.Host != "" {
		base := b.snap.HostCwds[v.Host]
		if base == "" {
			base = "~"
		}
		switch {
		case wd == "":
			wd = base
		case path.IsAbs(wd) || wd == "~" || strings.HasPrefix(wd, "~/"):
		default:
			wd = path.Join(base, wd)
		}
		return v.Host + ":" + wd
	}
	switch {
	case wd == "":
		return b.snap.Cwd
	case filepath.IsAbs(wd):
		return wd
	case b.snap.Cwd != "":
		return filepath.Join(b.snap.Cwd, wd)
	}
	return ""
}

// rawInput is a call's arguments as a JSON value for rawInput: the decoded
// value when they are valid JSON, else the raw text; nil when empty.
func rawInput(args json.RawMessage) any {
	if len(args) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(args, &v) == nil {
		return v
	}
	return string(args)
}
