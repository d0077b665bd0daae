//go:build linux

package nsinit_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// python3 is Debian's: the one on PATH may live in root's home, out of
// uid 65534's reach.
const python3 = "/usr/bin/python3"

// everyMode starts an init for each sandbox mode of h (none at all,
// full-access, workspace-write, read-only) and runs check on it: what
// isolates a session holds in all of them.
func everyMode(t *testing.T, h *sandboxHost, check func(t *testing.T, in *nsinit.Init)) {
	t.Helper()
	for _, mode := range []sandbox.Mode{"", sandbox.FullAccess, sandbox.WorkspaceWrite, sandbox.ReadOnly} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			var p *sandbox.Policy
			if mode != "" {
				pol := h.policy(sandbox.NetworkOn)
				pol.Mode = mode
				p = &pol
			}
			in, _ := startSandboxed(t, p)
			check(t, in)
		})
	}
}

// TestIsolatedTerminals: a command sees a devpts instance of its
// session's own: it cannot open a terminal of the host's (here one the
// test opened, as a user's shell would be), and it can open terminals of
// its own (pty.openpty, script) in every mode.
func TestIsolatedTerminals(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if os.Geteuid() == 0 {
		// The command would open it as the user conch runs as.
		os.Chown(slave.Name(), testutil.UnprivilegedID, testutil.UnprivilegedID)
	}
	script := `if exec 3<` + slave.Name() + `; then echo opened the host\'s terminal; fi
ls /dev/pts | tr '\n' ' '; echo
` + python3 + ` -c 'import pty, os; m, s = pty.openpty(); print(os.ttyname(s))'
script -qc 'tty' /dev/null | tr -d '\r'`
	everyMode(t, h, func(t *testing.T, in *nsinit.Init) {
		_, stdout, stderr := h.runIn(t, in, script)
		if want := "ptmx \n/dev/pts/0\n/dev/pts/0\n"; stdout != want {
			t.Errorf("stdout %q, want %q (stderr %q)", stdout, want, stderr)
		}
		if !strings.Contains(stderr, slave.Name()+": No such file or directory") {
			t.Errorf("opening the host's %s: stderr %q", slave.Name(), stderr)
		}
	})
}

// TestIsolatedTerminalsOfSessions: a terminal a command of one session
// opened is out of reach of another session's commands.
func TestIsolatedTerminalsOfSessions(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	a, _ := startSandboxed(t, &p)
	b, _ := startSandboxed(t, &p)
	// A holds a terminal open while it runs.
	r, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ch, err := a.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c",
		python3 + ` -c 'import pty, os, sys; m, s = pty.openpty(); print(os.ttyname(s), flush=True); sys.stdin.read()'`},
		Env: h.env, Dir: h.ws, Stdout: ow})
	ow.Close()
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 64)
	n, _ := r.Read(line)
	name := strings.TrimSpace(string(line[:n]))
	if name != "/dev/pts/0" {
		t.Fatalf("A's terminal: %q", name)
	}
	if code, out, stderr := h.runIn(t, b, `ls /dev/pts; exec 3<`+name); code == 0 || out != "ptmx\n" || !strings.Contains(stderr, "No such file") {
		t.Errorf("B: status %d, stdout %q, stderr %q; want A's terminal out of sight", code, out, stderr)
	}
	ch.Terminate(0)
	wait(t, ch)
	ch.Release()
}

// TestIsolatedShm: /dev/shm is a tmpfs of the session's own, of
// nsinit.MaxShmBytes: what a command leaves there is not the host's, and
// ends with the session.
func TestIsolatedShm(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	name := "conch-test-" + marker
	everyMode(t, h, func(t *testing.T, in *nsinit.Init) {
		_, stdout, stderr := h.runIn(t, in, `echo x > /dev/shm/`+name+` && df -B1 --output=size /dev/shm | tail -1 | tr -d ' '`)
		if want := strconv.Itoa(nsinit.MaxShmBytes) + "\n"; stdout != want {
			t.Errorf("size of /dev/shm: %q, want %q (stderr %q)", stdout, want, stderr)
		}
		if _, err := os.Stat("/dev/shm/" + name); err == nil {
			os.Remove("/dev/shm/" + name)
			t.Error("a command's /dev/shm file is on the host")
		}
	})
}

// TestIsolatedKeyring: a key in the session keyring of the process that
// starts the init cannot be read by its commands, in any mode.
func TestIsolatedKeyring(t *testing.T) {
	nr, ok := map[string]int{"amd64": 250, "arm64": 219}[runtime.GOARCH]
	if !ok {
		t.Skip("no keyctl number for " + runtime.GOARCH)
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	for _, mode := range []sandbox.Mode{"", sandbox.FullAccess, sandbox.WorkspaceWrite, sandbox.ReadOnly} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			// The session keyring belongs to a thread's credentials:
			// this thread's, which forks the init. (Unlocked before the
			// goroutine ends: the thread lives on, and so does the
			// init's parent-death signal.)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if _, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
				t.Skipf("no keyrings here: %v", errno)
			}
			id, err := unix.AddKey("user", "conch-test-"+marker, []byte("s3cret"), unix.KEY_SPEC_SESSION_KEYRING)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
			var p *sandbox.Policy
			if mode != "" {
				pol := h.policy(sandbox.NetworkOn)
				pol.Mode = mode
				p = &pol
			}
			in, _ := startSandboxed(t, p)
			script := fmt.Sprintf(python3+` -c 'import ctypes
l = ctypes.CDLL(None, use_errno=True); b = ctypes.create_string_buffer(64)
n = l.syscall(%d, 11, %d, b, 64)
print(b.raw[:n].decode() if n >= 0 else "errno %%d" %% ctypes.get_errno())'`, nr, id)
			if _, stdout, stderr := h.runIn(t, in, script); strings.Contains(stdout, "s3cret") || !strings.HasPrefix(stdout, "errno ") {
				t.Errorf("reading the user's key: stdout %q, stderr %q", stdout, stderr)
			}
		})
	}
}

// TestReadOnlyCgroups: every cgroup file system a command sees is
// read-only, in every mode: it cannot move itself out of its cgroup.
func TestReadOnlyCgroups(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	everyMode(t, h, func(t *testing.T, in *nsinit.Init) {
		_, stdout, stderr := h.runIn(t, in, `awk '$3 ~ /^cgroup/ { split($4, o, ","); print o[1] }' /proc/self/mounts | sort -u`)
		if stdout != "ro\n" && stdout != "" {
			t.Errorf("cgroup mounts: %q, want ro (stderr %q)", stdout, stderr)
		}
		if os.Geteuid() == 0 {
			if code, _, stderr := h.runIn(t, in, `for m in $(awk '$3 == "cgroup2" { print $2 }' /proc/self/mounts); do echo $$ > $m/cgroup.procs || exit 1; done; exit 0`); code == 0 {
				t.Errorf("root moved itself into another cgroup (stderr %q)", stderr)
			}
		}
	})
}

// TestNoSetuidFiles: no file a command creates or changes gets a setuid
// or setgid bit, in every mode; other modes still work.
func TestNoSetuidFiles(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	script := `f=/tmp/conch-suid-$$; trap 'rm -f $f $f.2 $f.3' EXIT
touch $f && chmod 755 $f && echo chmod ok
chmod 4755 $f; chmod g+s $f
` + python3 + ` -c 'import os, sys
for m in (0o4755, 0o2755):
    try: os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, m); print("created", oct(m))
    except OSError as e: print(e.strerror)
try: os.mknod(sys.argv[2], 0o104755); print("mknod")
except OSError as e: print(e.strerror)
try: os.chmod(sys.argv[1] if os.path.exists(sys.argv[1]) else sys.argv[3], 0o6755); print("chmod")
except OSError as e: print(e.strerror)
fd = os.open(sys.argv[3], os.O_CREAT | os.O_WRONLY, 0o755)
try: os.fchmod(fd, 0o4755); print("fchmod")
except OSError as e: print(e.strerror)' $f.2 $f.3 $f
stat -c %a $f`
	want := "chmod ok\nOperation not permitted\nOperation not permitted\nOperation not permitted\nOperation not permitted\nOperation not permitted\n755\n"
	everyMode(t, h, func(t *testing.T, in *nsinit.Init) {
		_, stdout, stderr := h.runIn(t, in, script)
		if stdout != want {
			t.Errorf("stdout %q, want %q (stderr %q)", stdout, want, stderr)
		}
		for _, s := range []string{"chmod: changing permissions of '/tmp/conch-suid-", "': Operation not permitted"} {
			if !strings.Contains(stderr, s) {
				t.Errorf("stderr %q lacks %q", stderr, s)
			}
		}
	})
}

// TestNoSetuidRootForUsers: the attack of a root server's command, as an
// ordinary user of the host meets it: a copy of id left setuid in /tmp
// by a command under full-access does not run as root for uid 65534.
func TestNoSetuidRootForUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the attack needs a root server")
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	p.Mode = sandbox.FullAccess
	in, _ := startSandboxed(t, &p)
	dir := testutil.UnprivilegedDir(t)
	planted := filepath.Join(dir, "id")
	h.runIn(t, in, `cp /usr/bin/id `+planted+` && chmod u+s `+planted)
	if _, err := os.Stat(planted); err != nil {
		t.Fatalf("the command made no copy: %v", err)
	}
	run := exec.Command(planted, "-u")
	testutil.Unprivileged(t, run)
	out, err := run.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(testutil.UnprivilegedID) {
		t.Errorf("uid %d ran the planted id as euid %s", testutil.UnprivilegedID, got)
	}
}

// TestFullAccessCapabilities: under full-access a command running as
// root keeps its capabilities but CAP_SYS_ADMIN, CAP_SYS_PTRACE and
// CAP_SETFCAP (file capabilities are the setuid bit's twin).
func TestFullAccessCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root has capabilities to keep")
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	p.Mode = sandbox.FullAccess
	in, _ := startSandboxed(t, &p)
	_, stdout, _ := h.runIn(t, in, `grep CapBnd /proc/self/status | cut -f2`)
	bnd, err := strconv.ParseUint(strings.TrimSpace(stdout), 16, 64)
	if err != nil {
		t.Fatalf("CapBnd %q: %v", stdout, err)
	}
	for _, c := range []uint{unix.CAP_SYS_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SETFCAP} {
		if bnd&(1<<c) != 0 {
			t.Errorf("capability %d in the bounding set %x", c, bnd)
		}
	}
	if bnd&(1<<unix.CAP_CHOWN) == 0 {
		t.Errorf("CAP_CHOWN dropped too: %x", bnd)
	}
}

// unreachableEnv, set for a copy of this test binary, names a cgroup
// mount its user cannot reach, for TestUnreachableCgroupMountHelper.
const unreachableEnv = "NSINIT_TEST_UNREACHABLE_CGROUP"

// TestUnreachableCgroupMount: a cgroup file system mounted where the
// init's user cannot search (a pod's hostPath volume holding the
// container runtime's cgroup mounts, say) does not cost the init its
// start: its commands cannot reach that mount either, so it need not be
// made read-only. Run as uid 65534 in a mount namespace of its own, in
// which root mounted a cgroup2 file system under a 0700 directory.
func TestUnreachableCgroupMount(t *testing.T) {
	dir := testutil.UnprivilegedDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nsinit.test")
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	locked := t.TempDir() // root's, 0700
	point := filepath.Join(locked, "cg")
	if err := os.Mkdir(point, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := clean(t)
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t cgroup2 none "$1" && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$2" -test.run '^TestUnreachableCgroupMountHelper$' -test.v -test.count=1`,
		"sh", point, bin)
	cmd.Dir = dir
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+dir, "HOME="+dir, noRaceSleep, unreachableEnv+"="+point)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnreachableCgroupMountHelper ") {
		t.Fatalf("as uid 65534 beside an unreachable cgroup mount: %v\n%s", err, out)
	}
}

// TestUnreachableCgroupMountHelper is TestUnreachableCgroupMount's part
// as uid 65534: the init starts, a command runs, and the mount stays out
// of its reach.
func TestUnreachableCgroupMountHelper(t *testing.T) {
	point := os.Getenv(unreachableEnv)
	if point == "" {
		t.Skip("run by TestUnreachableCgroupMount")
	}
	marker := clean(t)
	in := startInit(t)
	ws, stdout, stderr := run(t, in, marker, `echo ok; ls "`+point+`" 2>&1 >/dev/null | grep -c 'Permission denied'`)
	if ws.ExitStatus() != 0 || stdout != "ok\n1\n" {
		t.Errorf("in the init: %v, stdout %q, stderr %q; want ok and the mount out of reach", ws, stdout, stderr)
	}
}
