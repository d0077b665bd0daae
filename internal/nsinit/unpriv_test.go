//go:build linux

package nsinit_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	"TestStdinAndEnv",
	"TestTerminateIgnoringTERM",
	"TestSignalGroup",
	"TestKillLeftoversEscapees",
	"TestKillLeftoversAfterRelease",
	"TestKillLeftoversForkLoop",
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

// TestUnprivileged runs unprivTests as uid 65534 (with a copy of this test
// binary that user can execute) and requires each to pass, not skip.
func TestUnprivileged(t *testing.T) {
	dir := testutil.UnprivilegedDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nsinit.test")
	copyFile(t, exe, bin)
	marker := clean(t)
	cmd := exec.Command(bin, "-test.run=^("+strings.Join(unprivTests, "|")+")$", "-test.v", "-test.count=1")
	testutil.Unprivileged(t, cmd)
	cmd.Dir = dir
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+dir, "HOME="+dir, noRaceSleep)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid %d: %v\n%s", testutil.UnprivilegedID, err, out)
	}
	for _, name := range unprivTests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("as uid %d, %s did not pass:\n%s", testutil.UnprivilegedID, name, out)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("as uid %d:\n%s", testutil.UnprivilegedID, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
