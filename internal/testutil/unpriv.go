package testutil

import (
	"os"
	"os/exec"
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
