//go:build linux

package nsinit_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestShortSlice: the init's serving thread and the supervisor's workers
// run with the shortest slice (Linux 6.12 and later; proc.ShortSlice),
// the commands with the default one, as this test's threads have.
func TestShortSlice(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	own, err := os.ReadFile("/proc/thread-self/sched")
	if err != nil {
		t.Fatal(err)
	}
	def := testutil.SchedSlice(string(own))
	// The init is 1 in its namespace; a command may read its threads'.
	// A supervised open first: the worker that answers it has taken its
	// slice (the others may not have run yet).
	script := `: > supervised && rm supervised
sed -n 's/^se.slice *: *//p' /proc/self/sched
for f in /proc/1/task/*/sched; do sed -n 's/^se.slice *: *//p' $f; done | sort | uniq -c`
	code, stdout, stderr, markers := h.runMarked(t, in, plan, script)
	if code != 0 || len(markers) > 0 {
		t.Fatalf("exit %d, markers %q, stderr %q", code, markers, stderr)
	}
	cmd, threads, _ := strings.Cut(stdout, "\n")
	t.Logf("a command's slice %s ns; the init's threads (count, slice):\n%s", cmd, threads)
	if cmd != def {
		t.Errorf("a command's slice %s ns; want %s, the default", cmd, def)
	}
	short := 0
	for line := range strings.Lines(threads) {
		if f := strings.Fields(line); len(f) == 2 && f[1] == "100000" {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			short += n
		}
	}
	// The serving thread and the worker that answered the open.
	if testutil.KernelAtLeast(t, 6, 12) && short < 2 {
		t.Errorf("%d of the init's threads with the shortest slice; want at least 2", short)
	}
}
