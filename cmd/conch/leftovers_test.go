//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestTaskLeftoversServe: a background task whose command exits at once
// but leaves a fork-and-exit loop says so once it completed, in
// task_output and task_list, and task_kill ends the loop and says what it
// killed, where it used to answer "had already finished" while the loop
// ran on (issue 19 item 13). Through the binary on its defaults, as root
// and as an unprivileged user.
func TestTaskLeftoversServe(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			marker := testutil.Marker(t)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
			home, ws := sandboxDirs(t, nobody)
			cs := startSandboxed(t, marker, nobody, home, ws, nil)
			// The beat file in the workspace, which the commands may write.
			loop, _ := testutil.ForkLoop(t)
			beat := filepath.Join(ws, "beat")
			writeFile(t, beat, "")
			if nobody {
				chownTree(t, beat)
			}
			loop = regexp.MustCompile(`utime\(undef, undef, "[^"]*"\)`).ReplaceAllString(loop, `utime(undef, undef, "`+beat+`")`)
			id := taskID(t, text(t, callTool(t, cs, "bash", bashBG(loop+" >/dev/null 2>&1 & echo started"))))
			out := text(t, callTool(t, cs, "task_output", map[string]any{"task_id": id, "wait": true}))
			if !regexp.MustCompile(`^started\n\[status: completed, exit code: 0; \d+ processes it started are still running\]$`).MatchString(out) {
				t.Errorf("task_output: %q", out)
			}
			testutil.WaitBeating(t, beat)
			list := text(t, callTool(t, cs, "task_list", map[string]any{}))
			if !regexp.MustCompile(`^` + id + ` \[bash\] completed, exit code: 0, \d+ processes still running, \d+\.\ds — `).MatchString(list) {
				t.Errorf("task_list: %q", list)
			}
			kill := text(t, callTool(t, cs, "task_kill", map[string]any{"task_id": id}))
			if !regexp.MustCompile(`^killed what task ` + id + ` left running \(\d+ processes\) \[status: completed, exit code: 0\]$`).MatchString(kill) {
				t.Errorf("task_kill: %q", kill)
			}
			if testutil.Beating(t, beat) {
				t.Error("the fork loop runs after task_kill")
			}
			if kill := text(t, callTool(t, cs, "task_kill", map[string]any{"task_id": id})); kill != "task "+id+" had already finished [status: completed, exit code: 0]" {
				t.Errorf("second task_kill: %q", kill)
			}
			if list := text(t, callTool(t, cs, "task_list", map[string]any{})); strings.Contains(list, "still running") {
				t.Errorf("task_list after the kill: %q", list)
			}
			os.Remove(beat)
		})
	}
}
