package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/tools"
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
// in form mode: the question's message, and one field, "decision", whose
// values are the choices. accept with a choice answers it, decline is a
// no, cancel no answer (docs/rules.md#asking).
type elicitApprover struct{ ss *mcp.ServerSession }

func (a elicitApprover) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	choices := q.Choices()
	res, err := a.ss.Elicit(ctx, &mcp.ElicitParams{
		Mode:    "form",
		Message: q.Message(),
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
	switch res.Action {
	case "accept":
	case "cancel":
		// Dismissed without an answer: clients without a user (Claude
		// Code -p, codex exec) answer every question so, at once.
		return tools.Unanswered, nil
	default: // decline: the user said no
		return tools.Declined, nil
	}
	switch d := res.Content["decision"]; {
	case d == q.OnceChoice():
		return tools.AllowOnce, nil
	case d == q.SessionChoice() && d != "":
		return tools.AllowSession, nil
	}
	return tools.Declined, nil
}
