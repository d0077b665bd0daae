//go:build linux

package nsinit_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestIdentityAndView: inside, `id -u` and `id -g` print the numbers they
// print outside, files keep their owner, and /proc shows only the
// namespace: the init as pid 1 and the command's own processes, never
// the server.
func TestIdentityAndView(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`id -u; id -g; touch %s/f; stat -c %%u:%%g %s/f
echo pids $(cd /proc && echo [0-9]*)
cat /proc/[0-9]*/cmdline | tr '\0\n' '  '; echo
test -e /proc/%d && echo server-visible; echo end`, dir, dir, os.Getpid())
	ws, out, errOut := run(t, in, marker, script)
	if ws.ExitStatus() != 0 || errOut != "" {
		t.Fatalf("status %v, stderr %q, stdout %q", ws, errOut, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("output %q: want 6 lines", out)
	}
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	if lines[0] != uid || lines[1] != gid {
		t.Errorf("id -u, id -g inside = %s, %s; outside %s, %s", lines[0], lines[1], uid, gid)
	}
	if lines[2] != uid+":"+gid {
		t.Errorf("a file made inside is owned by %s, want %s:%s", lines[2], uid, gid)
	}
	fi, err := os.Stat(dir + "/f")
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("outside, the file is owned by %d, want %d", st.Uid, os.Getuid())
	}
	// pid 1 (the init), bash, and the subshell or cat of the moment.
	pids := strings.Fields(strings.TrimPrefix(lines[3], "pids "))
	if len(pids) < 2 || len(pids) > 4 || pids[0] != "1" {
		t.Errorf("/proc lists %v: want the init (1) and the command's few processes", pids)
	}
	// The server is this test binary, run with -test.* flags; the init is
	// the same binary without them.
	if strings.Contains(lines[4], "-test.") {
		t.Errorf("a command sees the server's command line: %q", lines[4])
	}
	if lines[5] != "end" {
		t.Errorf("the server's pid %d is visible inside: %q", os.Getpid(), lines[5])
	}
}

// TestCommandPrivileges: a command gets no capabilities as a non-root
// user, and as root it cannot mount or unmount (so it cannot uncover the
// host's /proc), nor kill or stop the init.
func TestCommandPrivileges(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ws, out, _ := run(t, in, marker, `umount /proc 2>/dev/null && echo umounted
mount -t proc proc /mnt 2>/dev/null && echo mounted
kill -TERM 1; kill -KILL 1; kill -INT 1
grep -E '^Cap(Eff|Amb|Bnd):' /proc/self/status`)
	if ws.ExitStatus() != 0 {
		t.Fatalf("status %v, output %q", ws, out)
	}
	if strings.Contains(out, "mounted") {
		t.Errorf("a command could mount: %q", out)
	}
	caps := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, hex, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("line %q", l)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		caps[name] = v
	}
	const sysAdmin, sysPtrace = 1 << 21, 1 << 19
	if caps["CapBnd"]&(sysAdmin|sysPtrace) != 0 {
		t.Errorf("CapBnd %x holds CAP_SYS_ADMIN or CAP_SYS_PTRACE", caps["CapBnd"])
	}
	if caps["CapAmb"] != 0 {
		t.Errorf("CapAmb %x: ambient capabilities leaked to the command", caps["CapAmb"])
	}
	if os.Getuid() != 0 && caps["CapEff"] != 0 {
		t.Errorf("CapEff %x: a non-root command has capabilities", caps["CapEff"])
	}
	// The init survived the signals and serves on.
	if ws, out, _ := run(t, in, marker, "echo still"); ws.ExitStatus() != 0 || out != "still\n" {
		t.Errorf("after the signals to pid 1: status %v, output %q", ws, out)
	}
}

// TestWaitStatus: the raw wait status comes back, not pid 1's 128+n.
func TestWaitStatus(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	for _, c := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 3", 3, 0},
		{"true", 0, 0},
		{"exit 255", 255, 0},
		{"kill -TERM $$", 0, syscall.SIGTERM},
		{"kill -KILL $$", 0, syscall.SIGKILL},
		{"kill -SEGV $$", 0, syscall.SIGSEGV},
	} {
		ws, _, _ := run(t, in, marker, c.script)
		if c.sig != 0 {
			if !ws.Signaled() || ws.Signal() != c.sig {
				t.Errorf("%q: status %#x, want killed by %v", c.script, int(ws), c.sig)
			}
			continue
		}
		if !ws.Exited() || ws.ExitStatus() != c.code {
			t.Errorf("%q: status %#x, want exit %d", c.script, int(ws), c.code)
		}
	}
}

// TestStdinAndEnv: the descriptors and the environment given are the
// command's, and no other descriptor (the init's socket) leaks to it.
func TestStdinAndEnv(t *testing.T) {
	marker := clean(t)
	// A descriptor the server leaks without close-on-exec (as a careless
	// parent of the server may) reaches the init through its exec.
	leak, err := unix.Open(os.DevNull, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	in := startInit(t)
	unix.Close(leak)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("from stdin\n")
	w.Close()
	stdout, ow := capture(t)
	ch, err := in.Spawn(nsinitCommand(marker, `read l; echo "$l $FOO $(pwd)"; echo err >&2; echo fds $(ls /proc/self/fd)`, r, ow, ow))
	r.Close()
	ow.Close()
	if err != nil {
		t.Fatal(err)
	}
	ws := wait(t, ch)
	ch.Release()
	if got := stdout.text(t); ws.ExitStatus() != 0 || got != "from stdin bar /tmp\nerr\nfds 0 1 2 3\n" {
		t.Errorf("status %v, output %q", ws, got)
	}
}

// TestTerminateIgnoringTERM: a group that ignores SIGTERM is SIGKILLed
// after the grace, and not before.
func TestTerminateIgnoringTERM(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ch, stdout, _ := spawn(t, in, marker, `trap "" TERM; sleep 600 & echo ready; wait`)
	testutil.WaitFor(t, 10*time.Second, "the command to start", func() bool { return len(testutil.Processes(marker)) >= 2 })
	const grace = 300 * time.Millisecond
	t0 := time.Now()
	escalated, err := ch.Terminate(grace)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); !escalated || d < grace {
		t.Errorf("Terminate: escalated %v after %v; want SIGKILL after the grace %v", escalated, d, grace)
	}
	if ws := wait(t, ch); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("status %v, want SIGKILL", ws)
	}
	if alive, err := ch.Alive(); err != nil || alive {
		t.Errorf("Alive after Terminate: %v, %v", alive, err)
	}
	stdout.text(t)
	ch.Release()
	if err := ch.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal after Release: no error; the group id may name another group")
	}
}

// TestSignalGroup: Signal reaches every member of the command's group.
func TestSignalGroup(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ch, stdout, _ := spawn(t, in, marker, `sleep 600 & sleep 600 & wait`)
	testutil.WaitFor(t, 10*time.Second, "the sleeps", func() bool { return len(testutil.Processes(marker)) == 3 })
	if err := ch.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ws := wait(t, ch); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("status %v, want SIGTERM", ws)
	}
	testutil.WaitFor(t, 5*time.Second, "the group to go", func() bool { return len(testutil.Processes(marker)) == 0 })
	stdout.text(t)
	ch.Release()
}

// TestStartGivesUpOnASilentInit: an init that never answers (here a
// program that is not one) is killed after the start timeout, and Start
// returns an error instead of waiting for ever.
func TestStartGivesUpOnASilentInit(t *testing.T) {
	defer nsinit.SetStartTimeout(500 * time.Millisecond)()
	start := time.Now()
	in, err := nsinit.Start(&nsinit.Options{Path: "/bin/sleep", Args: []string{"600"}})
	if err == nil {
		in.Close()
		t.Fatal("Start of a silent init succeeded")
	}
	if took := time.Since(start); took > 5*time.Second || !strings.Contains(err.Error(), "no answer within 500ms") {
		t.Errorf("Start = %v after %v; want the timeout's error within about 500ms", err, took)
	}
}

// TestStartAnsweredAtTheTimeout: an init whose answer was read as its
// start timed out is either ready, and runs a command, or its start
// fails; never a ready init that the timeout killed (the session's first
// spawn then failed with ErrInitExited).
func TestStartAnsweredAtTheTimeout(t *testing.T) {
	marker := clean(t)
	defer nsinit.SetStartTimeout(3 * time.Second)()
	defer nsinit.DelayStartCheck(4 * time.Second)()
	in, err := nsinit.Start(initOptions())
	if err != nil {
		if !strings.Contains(err.Error(), "no answer within 3s") {
			t.Errorf("Start = %v, want the timeout's error", err)
		}
		return
	}
	defer in.Close()
	ch, err := in.Spawn(nsinitCommand(marker, "true", nil, nil, nil))
	if err != nil {
		t.Fatalf("Start succeeded, then its first spawn: %v", err)
	}
	wait(t, ch)
	ch.Release()
}

// TestOutputClosedAtExit: once a command's exit is reported, the init
// holds no copy of its descriptors, even when its thread is slow to end
// the spawn (as on a loaded machine): a copy kept would hold the
// command's output open past its exit, and the server's drain, cut at
// its grace, would say a process the command started holds it.
func TestOutputClosedAtExit(t *testing.T) {
	marker := clean(t)
	in := startInitAs(t, "init-slow-tail")
	for range 5 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ch, err := in.Spawn(nsinitCommand(marker, "true", nil, w, w))
		w.Close()
		if err != nil {
			r.Close()
			t.Fatal(err)
		}
		wait(t, ch)
		fd := int(r.Fd()) // once: Fd makes the file blocking
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		n, err := unix.Read(fd, b[:])
		r.Close()
		ch.Release()
		if n != 0 || err != nil {
			t.Fatalf("the output of an exited command read %d bytes, %v; want its end", n, err)
		}
	}
}

// TestExitByPidfd: an init whose reaper never runs still reports every
// command's exit, with its status, through the command's pidfd: commands
// that end in another order than they started, one killed by a signal,
// one released while it runs (whose exit is not reported); and once they
// are all gone the init holds no pidfd.
func TestExitByPidfd(t *testing.T) {
	marker := clean(t)
	in := startInitAs(t, "init-no-reaper")
	for round := range 3 {
		slow, slowOut, slowErr := spawn(t, in, marker, "sleep 0.3; exit 5")
		released, _, _ := spawn(t, in, marker, "sleep 0.2")
		killed, _, _ := spawn(t, in, marker, "kill -TERM $$")
		fast, fastOut, _ := spawn(t, in, marker, "echo fast; exit 3")
		released.Release()
		if ws := wait(t, fast); ws.ExitStatus() != 3 || fastOut.text(t) != "fast\n" {
			t.Fatalf("round %d: fast command: %v", round, ws)
		}
		if ws := wait(t, killed); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("round %d: killed command: %v", round, ws)
		}
		if ws := wait(t, slow); ws.ExitStatus() != 5 {
			t.Fatalf("round %d: slow command: %v (stdout %q, stderr %q)", round, ws, slowOut.text(t), slowErr.text(t))
		}
		for _, ch := range []*nsinit.Child{fast, killed, slow} {
			ch.Release()
		}
	}
	// The released command's exit came too (its pidfd readied and was
	// closed): give it its 0.2 s. An unprivileged test cannot list the
	// descriptors of its init, which made itself non-dumpable.
	if _, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.Pid())); errors.Is(err, os.ErrPermission) {
		t.Log("the init's descriptors are not this user's to list: its pidfds not counted")
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := pidfds(t, in.Pid())
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the init holds %d pidfds after its commands ended", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSpawnNUL: a command with a NUL in its arguments or environment
// (which no exec can take) fails to spawn with the exec's own error, and
// the init serves the next one.
func TestSpawnNUL(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	for _, c := range []nsinit.Command{
		nsinitCommand(marker, "echo a\x00b", nil, nil, nil),
		func() nsinit.Command {
			c := nsinitCommand(marker, "true", nil, nil, nil)
			c.Env = append(c.Env, "NUL=\x00")
			return c
		}(),
	} {
		ch, err := in.Spawn(c)
		if err == nil {
			ch.Release()
			t.Fatal("a command with a NUL spawned")
		}
		if !strings.Contains(err.Error(), "fork/exec "+bashPath+": invalid argument") {
			t.Fatalf("Spawn: %v", err)
		}
	}
	if ws, out, _ := run(t, in, marker, "echo next"); ws.ExitStatus() != 0 || out != "next\n" {
		t.Fatalf("the next command: %v, %q", ws, out)
	}
}

// pidfds counts the pidfds process pid holds.
func pidfds(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// TestInitSurvivesEverySignal: a command sends the init every signal
// (SIGKILL and SIGSTOP included, which the kernel keeps from a PID
// namespace's init inside it), and the init goes on serving: the next
// command runs and its exit is reported.
func TestInitSurvivesEverySignal(t *testing.T) {
	marker := clean(t)
	in := startInit(t)
	ws, out, errOut := run(t, in, marker, `for s in $(seq 1 64); do kill -$s 1 2>/dev/null; done; echo sent`)
	if ws.ExitStatus() != 0 || out != "sent\n" {
		t.Fatalf("status %v, stdout %q, stderr %q", ws, out, errOut)
	}
	// No wait is needed: a signal pending for the init is delivered when
	// one of its threads next returns to user space, which reporting the
	// first command's exit and spawning the next already made it do; a
	// fatal one would have ended it by then.
	ws, out, errOut = run(t, in, marker, "echo alive; exit 4")
	if ws.ExitStatus() != 4 || out != "alive\n" {
		t.Fatalf("after the signals: status %v, stdout %q, stderr %q", ws, out, errOut)
	}
}
