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

// NobodyID is the uid and gid that Unprivileged runs tests as.
const NobodyID = 65534

// unprivEnv marks the child process Unprivileged starts, so that it runs
// the test instead of starting another child.
const unprivEnv = "CONCHTEST_UNPRIVILEGED"

// Unprivileged makes the rest of the calling test run without root's
// powers, for checks that root would pass by privilege (a directory it
// may not enter, another user's /proc files). Use it first thing:
//
//	if !testutil.Unprivileged(t) {
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
func Unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	if os.Getenv(unprivEnv) != "" {
		t.Fatalf("testutil: Unprivileged: still root in the child run as %d", NobodyID)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("testutil: Unprivileged: %v", err)
	}
	dir, err := os.MkdirTemp("", "conchtest-nobody-")
	if err != nil {
		t.Fatalf("testutil: Unprivileged: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, filepath.Base(exe))
	if err := copyExecutable(exe, bin); err != nil {
		t.Fatalf("testutil: Unprivileged: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testutil: Unprivileged: %v", err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(bin, "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), unprivEnv+"=1", "HOME="+dir, "TMPDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: NobodyID, Gid: NobodyID, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Skipf("testutil: Unprivileged: cannot start the test as uid %d: %v", NobodyID, err)
	}
	t.Logf("run as uid %d:\n%s", NobodyID, out)
	switch {
	case err != nil:
		t.Errorf("testutil: Unprivileged: the run as uid %d failed: %v", NobodyID, err)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Errorf("testutil: Unprivileged: the run as uid %d did not pass %s", NobodyID, t.Name())
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
