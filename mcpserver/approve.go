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
	return p != nil && elicits(p.Capabilities)
}

// elicits reports whether capabilities c declare form elicitation.
func elicits(c *mcp.ClientCapabilities) bool {
	if c == nil || c.Elicitation == nil {
		return false
	}
	e := c.Elicitation
	return e.Form != nil || e.URL == nil
}

// elicitApprover asks the user of an MCP client with elicitation/create
// in form mode: the question's message, and one field, "decision", whose
// values are the choices. accept with a choice answers it, decline is a
// no, cancel no answer (docs/rules.md#asking).
type elicitApprover struct{ ss *mcp.ServerSession }

func (a elicitApprover) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	res, err := a.ss.Elicit(ctx, questionParams(q))
	if err != nil {
		return tools.Declined, fmt.Errorf("elicitation: %w", err)
	}
	return answerOf(q, res), nil
}

// questionParams is q as a form elicitation: the question's message, and
// one field, "decision", whose values are the choices.
func questionParams(q tools.Question) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: q.Message(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"decision": map[string]any{"type": "string", "title": "Decision", "enum": q.Choices()},
			},
			"required": []string{"decision"},
		},
	}
}

// answerOf is the answer res gives to q: accept with a choice answers it,
// decline is a no, cancel no answer.
func answerOf(q tools.Question, res *mcp.ElicitResult) tools.Answer {
	switch res.Action {
	case "accept":
	case "cancel":
		// Dismissed without an answer: clients without a user (Claude
		// Code -p, codex exec) answer every question so, at once.
		return tools.Unanswered
	default: // decline: the user said no
		return tools.Declined
	}
	switch d := res.Content["decision"]; {
	case d == q.OnceChoice():
		return tools.AllowOnce
	case d == q.SessionChoice() && d != "":
		return tools.AllowSession
	}
	return tools.Declined
}
