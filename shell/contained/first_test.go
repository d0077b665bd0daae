//go:build linux

package contained_test

import (
	"context"
	"errors"
	"github.com/conch-dev/conch/internal/proc"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
)

// countedInits returns the options of a sandboxed executor (in a new
// workspace, dir, outside /tmp, which the sandbox leaves writable) whose inits each append a line to a file as they
// start, and count, which counts those lines.
func countedInits(t *testing.T) (lo *local.Options, initOpts *nsinit.Options, count func() int, dir string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "conch-first-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	log := filepath.Join(t.TempDir(), "inits")
	if err := os.WriteFile(log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	initOpts = initOptions()
	initOpts.Env = append(initOpts.Env, initLogEnv+"="+log)
	plan, err := sandbox.Policy{Workspace: dir, TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	initOpts.Sandbox = plan
	marker := testutil.Marker(t)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, marker) })
	lo = &local.Options{Cwd: dir, SpillParent: t.TempDir(), Environ: testutil.Env(marker)}
	count = func() int {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	return lo, initOpts, count, dir
}

// TestFirstOwnerOneInit: with Options.FirstOwner, the init NewWith
// starts to learn what the host enforces is that owner's, and its first
// command runs in it: one init start in all, where New starts two (its
// probe, then the owner's). What the host enforces is learnt the same.
func TestFirstOwnerOneInit(t *testing.T) {
	var unenforced [][]string
	for _, tc := range []struct {
		name  string
		first string
		want  int
	}{{"New", "", 2}, {"FirstOwner", "run", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			lo, initOpts, count, _ := countedInits(t)
			ex, err := contained.NewWith(lo, initOpts, &contained.Options{FirstOwner: tc.first})
			if err != nil {
				t.Fatalf("contained.NewWith: %v", err)
			}
			defer ex.Close()
			unenforced = append(unenforced, contained.Unenforced(ex))
			r := run(t, ex, "run", "echo ok")
			if r.Stdout.Text != "ok\n" || r.Sandbox == nil || r.Sandbox.Mode != "workspace-write" {
				t.Errorf("the first command: %q %q %+v; want ok under the sandbox", r.Stdout.Text, r.Stderr.Text, r.Sandbox)
			}
			if n := count(); n != tc.want {
				t.Errorf("%d inits started by the first command, want %d", n, tc.want)
			}
			if r := run(t, ex, "other", "echo ok"); r.Stdout.Text != "ok\n" {
				t.Errorf("another owner: %q %q", r.Stdout.Text, r.Stderr.Text)
			}
			if n := count(); n != tc.want+1 {
				t.Errorf("%d inits after another owner's command, want %d (one more)", n, tc.want+1)
			}
		})
	}
	if len(unenforced) == 2 && !slices.Equal(unenforced[0], unenforced[1]) {
		t.Errorf("Unenforced: %q with New, %q with FirstOwner", unenforced[0], unenforced[1])
	}
}

// TestFirstOwnerOtherBoundary: a first command of the FirstOwner that
// wants another workspace and a narrowing does not run in the kept init
// (built for the default workspace): the kept one ends, and the command
// gets the boundary it asked for.
func TestFirstOwnerOtherBoundary(t *testing.T) {
	lo, initOpts, count, dir := countedInits(t)
	ex, err := contained.NewWith(lo, initOpts, &contained.Options{FirstOwner: "run"})
	if err != nil {
		t.Fatalf("contained.NewWith: %v", err)
	}
	defer ex.Close()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := ex.Resolve(shell.Request{Command: "touch x && echo ok", Owner: "run", Workspace: ws, Workdir: ws,
		Narrowing: &shell.SandboxNarrowing{Mode: "read-only"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := shell.Run(context.Background(), ex, spec)
	if err != nil || r.Sandbox == nil || r.Sandbox.Mode != "read-only" || r.Stdout.Text == "ok\n" {
		t.Errorf("a narrowed first command: %q %q %+v, %v; want the write denied under read-only", r.Stdout.Text, r.Stderr.Text, r.Sandbox, err)
	}
	if n := count(); n != 2 {
		t.Errorf("%d inits, want 2 (the kept one, then the narrowed one)", n)
	}
}

// TestFirstOwnerFullAccess: under a full-access plan (the init of the
// commands a user let out of the sandbox) the workspace changes nothing,
// so the FirstOwner's first command runs in the kept init whatever its
// workspace: one init start.
func TestFirstOwnerFullAccess(t *testing.T) {
	lo, initOpts, count, dir := countedInits(t)
	initOpts.Sandbox = &sandbox.Plan{Mode: sandbox.FullAccess, Network: sandbox.NetworkOn}
	ex, err := contained.NewWith(lo, initOpts, &contained.Options{FirstOwner: "s"})
	if err != nil {
		t.Fatalf("contained.NewWith: %v", err)
	}
	defer ex.Close()
	if r, err := runIn(t, ex, "s", dir, "echo ok", nil); err != nil || r.Stdout.Text != "ok\n" {
		t.Errorf("the first command: %q %q, %v", r.Stdout.Text, r.Stderr.Text, err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d inits, want 1 (the kept one)", n)
	}
}

// TestSpareInit: with Options.Spare, an init is started ahead once the
// executor has learnt what the host enforces, and the next owner's
// first command runs in it (outside every namespace, the spare is the
// command's parent); another is started ahead for the owner after, and
// Close ends it.
func TestSpareInit(t *testing.T) {
	lo, initOpts, count, _ := countedInits(t)
	pids := func() []int {
		b, err := os.ReadFile(initOpts.Env[len(initOpts.Env)-1][len(initLogEnv)+1:])
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for _, line := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(line); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	ex, err := contained.NewWith(lo, initOpts, &contained.Options{Spare: true})
	if err != nil {
		t.Fatalf("contained.NewWith: %v", err)
	}
	defer ex.Close()
	testutil.WaitFor(t, 10*time.Second, "the probe and the spare started", func() bool { return count() == 2 })
	spare := pids()[1]
	start(t, ex, "a", "echo started; exec sleep 3141")
	info, err := proc.Stat(hostPid(t, "sleep 3141"))
	if err != nil {
		t.Fatal(err)
	}
	if info.PPid != spare {
		t.Errorf("the first command's init is %d, not the spare %d", info.PPid, spare)
	}
	testutil.WaitFor(t, 10*time.Second, "the next spare started", func() bool { return count() == 3 })
	next := pids()[2]
	if r := run(t, ex, "b", "echo ok"); r.Stdout.Text != "ok\n" {
		t.Errorf("another owner: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
	testutil.WaitFor(t, 10*time.Second, "a spare after b's start", func() bool { return count() == 4 })
	last := pids()[3]
	if err := ex.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, pid := range []int{spare, next, last} {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("init %d outlives Close", pid)
		}
	}
}
