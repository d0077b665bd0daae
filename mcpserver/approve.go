package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/tools"
)

// Choices of the approval form (the value of its "decision" field).
const (
	choiceOnce       = "Allow once"
	choiceSessionFmt = "Allow %s for this session"
	choiceDeny       = "Deny"
)

// canElicit reports whether the client declared form elicitation (an
// elicitation capability naming neither mode means form, as the
// specification says for clients older than the modes).
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// elicitApprover asks the user of an MCP client with elicitation/create
// in form mode: a message naming the command, its directory and the
// reason, and one choice to make.
type elicitApprover struct{ ss *mcp.ServerSession }

func (a elicitApprover) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	choices := []string{choiceOnce}
	session := ""
	if q.SessionPrefix != "" {
		session = fmt.Sprintf(choiceSessionFmt, q.SessionPrefix)
		choices = append(choices, session)
	}
	choices = append(choices, choiceDeny)
	res, err := a.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: approvalMessage(q),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": choices},
			},
			"required": []string{"decision"},
		},
	})
	if err != nil {
		return tools.Declined, fmt.Errorf("elicitation: %w", err)
	}
	if res.Action != "accept" { // decline, or cancel: the user dismissed the form
		return tools.Declined, nil
	}
	switch res.Content["decision"] {
	case choiceOnce:
		return tools.AllowOnce, nil
	case session:
		if session != "" {
			return tools.AllowSession, nil
		}
	}
	return tools.Declined, nil
}

// approvalMessage is the form's text: the command, its directory and
// why conch asks.
func approvalMessage(q tools.Question) string {
	why := q.Reason
	if q.Subject != q.Command {
		why += ": " + q.Subject
	}
	return fmt.Sprintf("Allow this command to run?\n\nCommand: %s\nDirectory: %s\nReason: %s", q.Command, q.Cwd, why)
}
