//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestRunLimits: --max-pids 20 (here from the configuration's
// containment.max_pids) stops a bounded fork bomb at the limit, under the
// sandbox too; --max-memory gets a 512 MiB writer killed and lets a
// 16 MiB one live. As root: this machine's pids and memory controllers
// are root's (TestRunLimitsRefused covers an ordinary user).
func TestRunLimits(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the pids and memory controllers are writable by root only here (TestRunLimitsRefused covers the rest)")
	}
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	writeFile(t, cfg, "[containment]\nmax_pids = 20\n")
	for _, args := range [][]string{{"--config", cfg}, {"--max-pids", "20", "--sandbox", "workspace-write"}} {
		out, errOut, _ := testutil.RunConch(t, marker, append(append([]string{"run"}, args...), "--", testutil.BoundedForks)...)
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || n >= 20 || n < 10 {
			t.Errorf("%v: the bounded fork bomb made %q children (stderr %q), want fewer than 20 (and not far fewer)", args, out, errOut)
		}
	}
	out, _, code := testutil.RunConch(t, marker, "run", "--max-memory", strconv.Itoa(64<<20), "--", testutil.MemoryHog(512))
	if code == 0 || strings.Contains(out, "survived") || !strings.Contains(out, "[killed by signal: SIGKILL]") {
		t.Errorf("a 512 MiB writer under --max-memory 64 MiB: exit %d, %q; want killed", code, out)
	}
	out, _, code = testutil.RunConch(t, marker, "run", "--max-memory", strconv.Itoa(64<<20), "--", testutil.MemoryHog(16))
	if code != 0 || out != "survived\n" {
		t.Errorf("a 16 MiB writer under --max-memory 64 MiB: exit %d, %q", code, out)
	}
}

// TestRunLimitsRefused: as an ordinary user, who has no pids controller
// here, --max-pids refuses to start naming the cause.
func TestRunLimitsRefused(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	cmd := unprivConch(t, marker, "run", "--max-pids", "20", "--", "true")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	const want = "conch run: containment unavailable: nsinit: pids limit: cgroup v1 /sys/fs/cgroup/pids"
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.HasPrefix(errOut.String(), want) || !strings.Contains(errOut.String(), "permission denied") || out.String() != "" {
		t.Errorf("--max-pids as uid %d: exit %d, stdout %q, stderr %q; want 2 and %q…permission denied", testutil.UnprivilegedID, code, out.String(), errOut.String(), want)
	}
}
