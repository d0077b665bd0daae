//go:build linux

package contained_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/contained"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/shelltest"
)

// newExecutor is a contained executor of o (its Cwd and SpillParent a
// new temporary directory) whose commands carry marker, for
// AssertNoProcesses; it is closed, and nothing of it may be left, when
// the test ends. initOpts nil means initOptions().
func newExecutor(t *testing.T, marker string, o local.Options, initOpts *nsinit.Options) *local.Executor {
	t.Helper()
	if initOpts == nil {
		initOpts = initOptions()
	}
	dir := t.TempDir()
	o.Cwd, o.SpillParent, o.Environ = dir, dir, testutil.Env(marker)
	ex, err := contained.New(&o, initOpts)
	if err != nil {
		t.Fatalf("contained.New: %v", err)
	}
	t.Cleanup(func() {
		if err := ex.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		testutil.AssertNoProcesses(t, marker)
	})
	return ex
}

// sandboxedWorkspace makes a workspace outside /tmp (which the sandbox
// leaves writable), removed at the end, and init options with the default
// sandbox for it.
func sandboxedWorkspace(t testing.TB, prefix string) (string, *nsinit.Options) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	plan, err := sandbox.Policy{Workspace: dir, TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := initOptions()
	o.Sandbox = plan
	return dir, o
}

// run runs command for owner in the foreground.
func run(t *testing.T, ex shell.Executor, owner, command string) shell.Result {
	t.Helper()
	return shelltest.MustRun(t, ex, shell.Request{Command: command, Owner: owner})
}

// start starts command for owner in the background and returns the first
// line it prints.
func start(t *testing.T, ex shell.Executor, owner, command string) (shell.Process, string) {
	t.Helper()
	p := shelltest.MustStart(t, ex, shell.Request{Command: command, Owner: owner})
	out := shelltest.ReadUntil(t, p, func(r shell.ReadResult) bool { return strings.Contains(r.Stdout, "\n") })
	return p, strings.SplitN(out.Stdout, "\n", 2)[0]
}

// hostPid waits for a live process whose command line is cmdline and
// returns its pid, outside every namespace.
func hostPid(t *testing.T, cmdline string) int {
	t.Helper()
	var pid int
	testutil.WaitFor(t, 10*time.Second, cmdline+" running", func() bool {
		pid = pidOf(t, cmdline)
		return pid != 0
	})
	return pid
}

// pidOf is the pid of a live process whose command line is cmdline, 0
// when there is none.
func pidOf(t *testing.T, cmdline string) int {
	t.Helper()
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range infos {
		if p.Alive() && testutil.Cmdline(p.Pid) == cmdline {
			return p.Pid
		}
	}
	return 0
}

// TestOwnersApart: each owner's commands run in an init of their own
// (docs/containment.md#one-init-per-session): they cannot see another
// owner's processes in /proc, nor kill them by their pid inside or
// outside; ending one owner kills what it left and leaves the other's
// running task alone; Close leaves nothing. As root, and as uid 65534
// (TestOwnersApartUnprivileged).
func TestOwnersApart(t *testing.T) { testOwnersApart(t) }

func TestOwnersApartUnprivileged(t *testing.T) {
	if testutil.AsUnprivileged(t) {
		testOwnersApart(t)
	}
}

func testOwnersApart(t *testing.T) {
	marker := testutil.Marker(t)
	ex := newExecutor(t, marker, local.Options{}, nil)

	task, nsPid := start(t, ex, "B", "echo $$; exec sleep 601")
	if _, err := strconv.Atoi(nsPid); err != nil {
		t.Fatalf("B's task printed %q, want its pid", nsPid)
	}
	outside := hostPid(t, "sleep 601")
	// Every command line in /proc; the brackets keep this command's own
	// from matching.
	const look = `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <$f; echo; done | grep 'sleep 60[1]'`
	if r := run(t, ex, "B", look); !strings.Contains(r.Stdout.Text, "sleep 601") {
		t.Fatalf("B does not see its own task: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
	for range 3 { // A's own pids move past the one B's task has inside
		run(t, ex, "A", "true")
	}
	if r := run(t, ex, "A", look); r.Stdout.Text != "" {
		t.Errorf("A sees B's task in /proc: %q", r.Stdout.Text)
	}
	if r := run(t, ex, "A", "kill -9 "+strconv.Itoa(outside)); shelltest.ExitCode(r) == 0 {
		t.Errorf("A's kill -9 %d (B's task, outside) succeeded", outside)
	}
	// B's task's pid inside B's namespace may name one of A's own
	// processes in A's (this very shell, even): whatever it hits there,
	// B's task lives on.
	run(t, ex, "A", "kill -9 "+nsPid)
	if pidOf(t, "sleep 601") == 0 {
		t.Errorf("A's kill -9 %s killed B's task", nsPid)
	}

	// A leaves a process outside its group; ending A kills it, not B's.
	run(t, ex, "A", "setsid sleep 602 >/dev/null 2>&1 &")
	hostPid(t, "sleep 602")
	ex.EndOwner("A")
	if pidOf(t, "sleep 602") != 0 {
		t.Error("A's setsid sleep survived EndOwner(A)")
	}
	if st := task.Status(); st != shell.StatusRunning {
		t.Errorf("B's task is %s after EndOwner(A), want running", st)
	}
	// A's next command starts a new init.
	if r := run(t, ex, "A", "echo again"); r.Stdout.Text != "again\n" {
		t.Errorf("A after its end: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
	// B's task is left to Close (and the cleanup's check).

	// Starting an init as an ordinary user makes the server dumpable for
	// a moment only.
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("the server is dumpable (%d, %v) after starting inits", d, err)
	}
}

// TestSpillApart: a session's commands read its own spill files (the
// result names them), and cannot read, list or add to another session's
// (docs/containment.md#spill-files). As root, and as uid 65534
// (TestSpillApartUnprivileged).
func TestSpillApart(t *testing.T) { testSpillApart(t) }

func TestSpillApartUnprivileged(t *testing.T) {
	if testutil.AsUnprivileged(t) {
		testSpillApart(t)
	}
}

func testSpillApart(t *testing.T) {
	ex := newExecutor(t, testutil.Marker(t), local.Options{MaxOutputBytes: 100}, nil)
	spilled := func(owner string) string {
		r := run(t, ex, owner, "seq 1 10000")
		if r.Stdout.SpillPath == "" {
			t.Fatalf("%s: no spill file: %+v", owner, r.Stdout)
		}
		return r.Stdout.SpillPath
	}
	a, b := spilled("A"), spilled("B")
	if r := run(t, ex, "A", "wc -l < "+a); r.Stdout.Text != "10000\n" {
		t.Errorf("A reads its own spill file: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
	if r := run(t, ex, "B", "cat "+a); r.Stdout.Text != "" || shelltest.ExitCode(r) == 0 {
		t.Errorf("B reads A's spill file %s: exit %d, %q", a, shelltest.ExitCode(r), r.Stdout.Text)
	}
	root := filepath.Dir(filepath.Dir(a))
	if r := run(t, ex, "B", "ls -A "+root); r.Stdout.Text != filepath.Base(filepath.Dir(b))+"\n" {
		t.Errorf("B lists the spill directory as %q %q, want its own only", r.Stdout.Text, r.Stderr.Text)
	}
	if r := run(t, ex, "B", "mkdir "+filepath.Join(root, "x")); shelltest.ExitCode(r) == 0 {
		t.Error("B made a directory beside the spill directories")
	}
	if r := run(t, ex, "B", "wc -l < "+b); r.Stdout.Text != "10000\n" {
		t.Errorf("B reads its own spill file: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
}

// TestFirstCommandsShareOneInit: commands arriving together as an
// owner's first start one init between them; another owner's is another.
func TestFirstCommandsShareOneInit(t *testing.T) {
	marker := testutil.Marker(t)
	ex := newExecutor(t, marker, local.Options{}, nil)
	const ns = "readlink /proc/self/ns/pid"
	var (
		wg   sync.WaitGroup
		seen [4]string
	)
	for i := range seen {
		wg.Go(func() {
			// Not run: t.Fatal belongs to the test's goroutine.
			spec, err := ex.Resolve(shell.Request{Command: ns, Owner: "C"})
			if err == nil {
				var r shell.Result
				r, err = shell.Run(context.Background(), ex, spec)
				seen[i] = r.Stdout.Text
			}
			if err != nil {
				t.Errorf("C: %v", err)
			}
		})
	}
	wg.Wait()
	for _, s := range seen[1:] {
		if s != seen[0] || s == "" {
			t.Fatalf("the first commands of one owner ran in PID namespaces %q", seen)
		}
	}
	if other := run(t, ex, "D", ns).Stdout.Text; other == seen[0] {
		t.Errorf("owners C and D share the PID namespace %s", other)
	}
}

// TestFailedInitFailsTheCommand: when an owner's init cannot start, that
// command fails with an error saying so, and the executor goes on
// serving the others.
func TestFailedInitFailsTheCommand(t *testing.T) {
	marker := testutil.Marker(t)
	dir := t.TempDir()
	plan, err := sandbox.Policy{Workspace: dir, TempDirs: []string{os.TempDir()}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	o := initOptions()
	o.Sandbox = plan
	ex := newExecutor(t, marker, local.Options{}, o)
	// A workspace that is a file: Landlock refuses it as a directory.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := ex.Resolve(shell.Request{Command: "true", Owner: "E", Workspace: file})
	if err != nil {
		t.Fatal(err)
	}
	_, err = shell.Run(context.Background(), ex, spec)
	if err == nil || !strings.Contains(err.Error(), "contained: start the session's init") {
		t.Fatalf("a command whose init cannot start: %v, want the init's failure", err)
	}
	if r := run(t, ex, "F", "echo ok"); r.Stdout.Text != "ok\n" {
		t.Errorf("another owner after the failure: %q %q", r.Stdout.Text, r.Stderr.Text)
	}
}

// TestCommandGroup: a piped command leads a process group of its own in
// the init's session, the server's (outside the namespace: 0 inside),
// with no controlling terminal (TestRunLeavesTerminal gives the server
// one); a terminal's
// program leads a session of its own, the terminal's
// (docs/containment.md#spawning-and-waiting). With warm shells too,
// which the init spawns the same way ahead of their command.
func TestCommandGroup(t *testing.T) {
	const ids = `set -- $(</proc/$$/stat); echo "pid=$1 pgid=$5 sid=$6"; if (: </dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi`
	parse := func(t *testing.T, out string) (pid, pgid, sid int, tty string) {
		t.Helper()
		var line string
		line, tty, _ = strings.Cut(strings.TrimSpace(out), "\n")
		tty = strings.TrimSpace(tty)
		if _, err := fmt.Sscanf(line, "pid=%d pgid=%d sid=%d", &pid, &pgid, &sid); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		return
	}
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			ex := newExecutor(t, testutil.Marker(t), local.Options{Warm: warm}, nil)
			groups := map[int]bool{}
			for range 3 {
				pid, pgid, sid, tty := parse(t, shelltest.MustRun(t, ex, shell.Request{Command: ids}).Stdout.Text)
				if pgid != pid || sid != 0 || tty != "no-tty" {
					t.Errorf("piped command: pid %d, group %d, session %d, %s; want a group of its own in the server's session (0 in the namespace), no terminal", pid, pgid, sid, tty)
				}
				groups[pgid] = true
			}
			if len(groups) != 3 {
				t.Errorf("three commands in groups %v, want three groups", groups)
			}
			pid, pgid, sid, tty := parse(t, terminalRun(t, ex, ids, ""))
			if pgid != pid || sid != pid || tty != "tty" {
				t.Errorf("terminal's program: pid %d, group %d, session %d, %s; want a session of its own with the terminal", pid, pgid, sid, tty)
			}
		})
	}
}

// TestJoinedGroup: a process that moves itself into another running
// command's process group before the init saw it, its parent gone (a
// double fork), is charged to that command. Where cgroups are writable,
// its own command's kill still takes it (it stays in that command's
// cgroup); without, it outlives that kill and dies with the other's
// (docs/containment.md#spawning-and-waiting, docs/security.md).
func TestJoinedGroup(t *testing.T) {
	for _, withCgroup := range []bool{false, true} {
		t.Run(fmt.Sprintf("cgroup=%v", withCgroup), func(t *testing.T) {
			io := initOptions()
			if withCgroup {
				cg := nsinit.ProbeCgroup()
				if !cg.Writable {
					t.Skip("cgroup v2 is not writable here (root, or a delegated subtree)")
				}
				io.Cgroup = cg.Dir
			}
			ex := newExecutor(t, testutil.Marker(t), local.Options{Grace: 300 * time.Millisecond}, io)
			dir := t.TempDir()
			start := func(command string) shell.Process {
				t.Helper()
				return shelltest.MustStart(t, ex, shell.Request{Command: command, Workdir: dir})
			}
			run := func(command string) string {
				t.Helper()
				return strings.TrimSpace(shelltest.MustRun(t, ex, shell.Request{Command: command, Workdir: dir}).Stdout.Text)
			}
			waitFile := func(name string, p shell.Process) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(b) > 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s not written: %+v", name, p.Read())
					}
				}
			}
			b := start("echo $$ > b.pid; sleep 600")
			// The joiner writes a.pid once its parent is gone (it was
			// re-parented to the init): no look can have seen its parent.
			waitFile("b.pid", b)
			a := start(`( perl -e 'setpgrp(0, $ARGV[0]) or die "setpgrp: $!\n"; select(undef, undef, undef, 0.01) while getppid() != 1; open(F, ">", "a.tmp"); print F $$; close F; rename("a.tmp", "a.pid"); sleep 600' "$(<b.pid)" & ); sleep 600`)
			waitFile("a.pid", a)
			if got, want := run(`set -- $(</proc/$(<a.pid)/stat); echo $5`), run("cat b.pid"); got != want {
				t.Fatalf("the joiner's group %q, want the other command's %q", got, want)
			}
			// A zombie is gone: killed, it waits for the init's reaper,
			// and kill -0 still finds it (its cgroup is empty by then).
			alive := `s=$(awk '{print $3}' /proc/$(<a.pid)/stat 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ] && echo alive || echo gone`
			a.Kill()
			<-a.Done()
			got := run(alive)
			if withCgroup && got != "gone" || !withCgroup && got != "alive" {
				t.Errorf("after its own command's kill the joiner is %s", got)
			}
			if b.Status() != shell.StatusRunning {
				t.Errorf("the other command: %v, want it running", b.Status())
			}
			b.Kill()
			<-b.Done()
			if got := run(alive); got != "gone" {
				t.Errorf("after the other command's kill the joiner is %s", got)
			}
		})
	}
}
