//go:build linux

package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The conch binary is built at most once per test binary, into binDir,
// which VerifyTestMain removes when the tests end.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// ConchBinary returns the path of cmd/conch built for this test binary.
// The first call builds it (a few seconds); a failed build fails t.
// Packages that call it must end their TestMain with VerifyTestMain,
// which removes the build.
func ConchBinary(t testing.TB) string {
	t.Helper()
	bin, err := BuildConch()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildConch is ConchBinary for where no test can be failed (a dial
// hook, say): it returns the build's error instead.
func BuildConch() (string, error) {
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "conch-bin-"); buildErr != nil {
			return
		}
		// Readable by all: some tests run it as an unprivileged user or
		// deploy it to a host they log in to as one.
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "conch")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/conch-dev/conch/cmd/conch").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/conch: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// removeConchBinary removes what ConchBinary built, if anything.
func removeConchBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Conch returns a command that runs the built binary with args. Its
// environment is this process's with the test's marker (Env) and a
// private TMPDIR and XDG_STATE_HOME (spill files and state die with the
// test).
func Conch(t testing.TB, marker string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(ConchBinary(t), args...)
	cmd.Env = append(Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	return cmd
}

// RunConch runs Conch(t, marker, args...) to its end and returns its
// stdout, its stderr and its exit status. It fails t only if the binary
// could not be run; a non-zero status is the caller's to judge.
func RunConch(t testing.TB, marker string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := Conch(t, marker, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("conch %q: %v", args, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}
