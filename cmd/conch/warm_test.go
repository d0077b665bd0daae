//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestServeWarmShell: conch serve on the defaults runs a foreground
// command after the first in the bash it started ahead
// (docs/executor.md#warm-shells), as root and as an unprivileged user,
// and leaves nothing behind.
func TestServeWarmShell(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			marker := testutil.Marker(t)
			defer testutil.AssertNoProcesses(t, marker)
			cmd := testutil.Conch(t, marker, "serve")
			if nobody {
				testutil.Unprivileged(t, cmd)
				dir := testutil.UnprivilegedDir(t)
				cmd.Env = append(cmd.Env, "TMPDIR="+dir, "XDG_STATE_HOME="+dir, "HOME="+dir)
				cmd.Dir = dir
			}
			cmd.Stderr = newLogBuffer(t, "conch serve")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cs, err := newClient(serverOptions{}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, legacyMCP)
			if err != nil {
				t.Fatalf("connect to conch serve: %v", err)
			}
			defer cs.Close()
			if got := text(t, callTool(t, cs, "bash", bash("echo first"))); got != "first\n" {
				t.Fatalf("echo first: %q", got)
			}
			var got string
			testutil.WaitFor(t, 10*time.Second, "a command in a warm shell", func() bool {
				got = text(t, callTool(t, cs, "bash", bash(`tr '\0' ' ' </proc/$$/cmdline; echo; echo hi`)))
				return strings.Contains(got, "__conch_command")
			})
			if !strings.HasSuffix(got, "\nhi\n") {
				t.Errorf("the warm shell's command printed %q", got)
			}
		})
	}
}
