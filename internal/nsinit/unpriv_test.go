//go:build linux

package nsinit_test

import (
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// unprivTests are the tests that TestUnprivileged runs again as uid
// 65534: an init started by an ordinary user needs ambient capabilities
// to set up, and must not pass them on.
var unprivTests = []string{
	"TestIdentityAndView",
	"TestCommandPrivileges",
	"TestWaitStatus",
	"TestExitByPidfd",
	"TestSpawnNUL",
	"TestShortSlice",
	"TestStdinAndEnv",
	"TestTerminateIgnoringTERM",
	"TestSignalGroup",
	"TestKillLeftoversEscapees",
	"TestKillLeftoversAfterRelease",
	"TestKillLeftoversForkLoop",
	"TestLeftoversAskInit",
	"TestNonDumpableDuringStart",
	"TestCloseKillsEverything",
	"TestServerKilled",
	"TestUserNamespacesOff",
	"TestProbe",
	"TestSandboxAttacks",
	"TestSandboxKeepsWorking",
	"TestSandboxUnixSockets",
	"TestSandboxNetworkOff",
	"TestSandboxReadOnly",
	"TestSandboxWithoutLandlock",
	"TestSupervisorRecord",
	"TestSupervisorWorks",
	"TestSupervisorGit",
	"TestSupervisorGitWorkflows",
	"TestSupervisorTOCTOU",
	"TestSupervisorUnixSockets",
	"TestSupervisorConnectWaits",
	"TestSupervisorUnavailable",
	"TestIsolatedTerminals",
	"TestIsolatedTerminalsOfSessions",
	"TestIsolatedShm",
	"TestIsolatedKeyring",
	"TestReadOnlyCgroups",
	"TestNoSetuidFiles",
	"TestSandboxRefer",
	"TestSandboxWheelBuild",
	"TestCacheLayer",
	"TestCacheLayerFallback",
}

// unprivRun is the run of unprivTests as uid 65534. TestMain starts it
// when TestUnprivileged is to run, so that it runs beside the other tests
// (which run one at a time here: each checks that no goroutine outlives
// it) instead of after them; TestUnprivileged waits for it. It holds no
// goroutine: its output goes to a file.
type unprivRun struct {
	marker, dir string
	cmd         *exec.Cmd
	out         *os.File
	err         error // of the set-up
	waited      bool  // wait has run: nothing of the run is left
	// what wait returned, for a second TestUnprivileged (-test.count)
	result    string
	resultErr error
}

var unpriv *unprivRun

// startUnprivileged starts unpriv when this is root and -test.run selects
// TestUnprivileged and -test.skip does not (TestMain has parsed the
// flags).
func startUnprivileged() {
	if os.Geteuid() != 0 {
		return // TestUnprivileged skips, as testutil.Unprivileged says
	}
	matches := func(flagName string) bool {
		top, _, _ := strings.Cut(flag.Lookup(flagName).Value.String(), "/")
		ok, err := regexp.MatchString(top, "TestUnprivileged")
		return ok && err == nil
	}
	if !matches("test.run") || flag.Lookup("test.skip").Value.String() != "" && matches("test.skip") {
		return
	}
	unpriv = &unprivRun{}
	unpriv.err = unpriv.start()
}

func (r *unprivRun) start() error {
	var err error
	if r.marker, err = testutil.MarkerFor("TestUnprivileged"); err != nil {
		return err
	}
	// A directory nobody owns, inside one anyone can enter.
	if r.dir, err = os.MkdirTemp("", "conchtest-unpriv-"); err != nil {
		return err
	}
	if err := os.Chown(r.dir, testutil.UnprivilegedID, testutil.UnprivilegedID); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Join(r.dir, "nsinit.test")
	if err := copyFile(exe, bin); err != nil {
		return err
	}
	if r.out, err = os.CreateTemp("", "conchtest-unpriv-out-"); err != nil {
		return err
	}
	r.cmd = exec.Command(bin, "-test.run=^("+strings.Join(unprivTests, "|")+")$", "-test.v", "-test.count=1")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testutil.UnprivilegedID, Gid: testutil.UnprivilegedID}}
	r.cmd.Dir = r.dir
	r.cmd.Env = append(testutil.Env(r.marker), "TMPDIR="+r.dir, "HOME="+r.dir, noRaceSleep)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	return r.cmd.Start()
}

// wait waits for the run and returns its output and error, and removes
// what it made.
func (r *unprivRun) wait() (string, error) {
	if r.waited {
		return r.result, r.resultErr
	}
	r.waited = true
	err := r.err
	if err == nil {
		err = r.cmd.Wait()
	}
	var out []byte
	if r.out != nil {
		out, _ = os.ReadFile(r.out.Name())
		r.out.Close()
		os.Remove(r.out.Name())
	}
	if r.dir != "" {
		os.RemoveAll(r.dir)
	}
	r.result, r.resultErr = string(out), err
	return r.result, r.resultErr
}

// stopUnprivileged ends a run TestUnprivileged did not wait for (a failed
// earlier test with -test.failfast), and removes what it made, whether or
// not it started.
func stopUnprivileged() {
	if unpriv == nil || unpriv.waited {
		return
	}
	if unpriv.err == nil {
		unpriv.cmd.Process.Kill()
	}
	unpriv.wait()
}

// TestUnprivileged requires each of unprivTests to pass, not skip, as uid
// 65534 (with a copy of this test binary that user can execute), in the
// run TestMain started.
func TestUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as uid 65534 needs root (run the tests as root, as CI does)")
	}
	r := unpriv
	if r == nil {
		t.Fatal("TestMain did not start the run as uid 65534")
	}
	t.Cleanup(func() { testutil.AssertNoProcesses(t, r.marker) })
	out, err := r.wait()
	if err != nil {
		t.Fatalf("as uid %d: %v\n%s", testutil.UnprivilegedID, err, out)
	}
	for _, name := range unprivTests {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("as uid %d, %s did not pass:\n%s", testutil.UnprivilegedID, name, out)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("as uid %d:\n%s", testutil.UnprivilegedID, out)
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
