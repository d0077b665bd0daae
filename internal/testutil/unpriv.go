//go:build linux

package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// UnprivilegedID is the uid and gid Unprivileged runs a command as: the
// user and group nobody.
const UnprivilegedID = 65534

// Unprivileged makes cmd run as an ordinary user (uid and gid
// UnprivilegedID, no supplementary groups), so that the kernel's
// permission checks apply to it: root holds capabilities such as
// CAP_DAC_OVERRIDE and CAP_SYS_PTRACE that pass them all, and CI runs as
// root. Only root can start a process as another user, so Unprivileged
// skips t when this process is not root.
//
// Everything cmd needs must be reachable by that user: its binary, its
// working directory and its files (t.TempDir() is not; see
// UnprivilegedDir).
func Unprivileged(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	needRoot(t)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: UnprivilegedID, Gid: UnprivilegedID}
}

// UnprivilegedDir returns a new directory that the user of Unprivileged
// owns (mode 0700 inside a directory anyone can enter), removed when the
// test ends. Like Unprivileged, it skips t when this process is not
// root.
func UnprivilegedDir(t testing.TB) string {
	t.Helper()
	needRoot(t)
	dir, err := os.MkdirTemp("", "conchtest-unpriv-")
	if err != nil {
		t.Fatalf("testutil: unprivileged dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, UnprivilegedID, UnprivilegedID); err != nil {
		t.Fatalf("testutil: unprivileged dir: %v", err)
	}
	return dir
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("testutil: acting as uid 65534 needs root (run the tests as root, as CI does)")
	}
}

// unprivEnv marks the child process AsUnprivileged starts, so that it runs
// the test instead of starting another child.
const unprivEnv = "CONCHTEST_UNPRIVILEGED"

// AsUnprivileged makes the rest of the calling test run without root's
// powers, for checks that root would pass by privilege (a directory it
// may not enter, another user's /proc files). Use it first thing:
//
//	if !testutil.AsUnprivileged(t) {
//		return // the test ran in a child process, as nobody
//	}
//
// Run by an unprivileged user, it returns true and the test goes on in
// this process. Run by root (CI runs as root), it runs this test alone in
// a copy of the test binary as uid and gid 65534 (nobody), reports that
// run's output and outcome as this test's, and returns false. The copy
// lives in a world-readable temporary directory, which is also the
// child's working directory (the package directory may not be open to
// nobody). It skips the test only when the child cannot be started (a
// system without setuid rights for root, e.g. in a user namespace that
// does not map 65534).
func AsUnprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	if os.Getenv(unprivEnv) != "" {
		t.Fatalf("testutil: AsUnprivileged: still root in the child run as %d", UnprivilegedID)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("testutil: AsUnprivileged: %v", err)
	}
	dir, err := os.MkdirTemp("", "conchtest-nobody-")
	if err != nil {
		t.Fatalf("testutil: AsUnprivileged: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, filepath.Base(exe))
	if err := copyExecutable(exe, bin); err != nil {
		t.Fatalf("testutil: AsUnprivileged: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testutil: AsUnprivileged: %v", err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(bin, "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), unprivEnv+"=1", "HOME="+dir, "TMPDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: UnprivilegedID, Gid: UnprivilegedID, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Skipf("testutil: AsUnprivileged: cannot start the test as uid %d: %v", UnprivilegedID, err)
	}
	t.Logf("run as uid %d:\n%s", UnprivilegedID, out)
	switch {
	case err != nil:
		t.Errorf("testutil: AsUnprivileged: the run as uid %d failed: %v", UnprivilegedID, err)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Errorf("testutil: AsUnprivileged: the run as uid %d did not pass %s", UnprivilegedID, t.Name())
	}
	return false
}

func copyExecutable(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
