package acp

import (
	"context"
	"fmt"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/conch-dev/conch/tools"
)

// Option ids of a permission request.
const (
	optionOnce    = "allow_once"
	optionSession = "allow_always" // for this session only
	optionReject  = "reject_once"
)

// permissionAsker asks the editor's user with session/request_permission
// about the tool call it belongs to.
type permissionAsker struct {
	conn    *sdk.AgentSideConnection
	session string
	call    sdk.ToolCallId
}

func (p permissionAsker) Approve(ctx context.Context, q tools.Question) (tools.Answer, error) {
	var options []sdk.PermissionOption
	for _, c := range q.Choices() {
		switch c {
		case q.OnceChoice():
			options = append(options, sdk.PermissionOption{OptionId: optionOnce, Kind: sdk.PermissionOptionKindAllowOnce, Name: c})
		case q.SessionChoice():
			options = append(options, sdk.PermissionOption{OptionId: optionSession, Kind: sdk.PermissionOptionKindAllowAlways, Name: c})
		default:
			options = append(options, sdk.PermissionOption{OptionId: optionReject, Kind: sdk.PermissionOptionKindRejectOnce, Name: c})
		}
	}
	resp, err := p.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(p.session),
		ToolCall: sdk.ToolCallUpdate{
			ToolCallId: p.call,
			Content:    []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(q.Message()))},
		},
		Options: options,
	})
	if err != nil {
		return tools.Declined, fmt.Errorf("session/request_permission: %w", err)
	}
	switch o := resp.Outcome; {
	case o.Cancelled != nil:
		return tools.Cancelled, nil
	case o.Selected == nil:
	case o.Selected.OptionId == optionOnce:
		return tools.AllowOnce, nil
	case o.Selected.OptionId == optionSession && q.SessionChoice() != "":
		return tools.AllowSession, nil
	}
	return tools.Declined, nil
}
