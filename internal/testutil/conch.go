//go:build linux

package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
// The first call builds it (sharedBuild: a second when the sources did
// not change since another test binary built them, several when it must
// link); a failed build fails t. Packages that call it must end their
// TestMain with VerifyTestMain, which removes the build.
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
		if sharedBuild(binPath) == nil {
			return
		}
		// Without the shared build (no cache directory, say): a build of
		// this test binary's own, whose error is the one to report.
		out, err := exec.Command("go", "build", "-o", binPath, conchPackage).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/conch: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

const conchPackage = "github.com/conch-dev/conch/cmd/conch"

// sharedBuild builds cmd/conch into this user's cache of test builds,
// one per module directory (a worktree's build is not another's), and
// copies it to path. `go build -o` links nothing when the file there is
// up to date with the sources, and linking is most of a build's time
// (7.6 s against 1.1 s at load 5): go test ./... runs the packages that
// build conch side by side, and without the shared file each linked its
// own. A lock on the directory makes one test binary build while the
// others wait, and then find the build up to date; it is held until the
// copy is made, so no build rewrites the file under it.
func sharedBuild(path string) error {
	cache, err := os.UserCacheDir()
	if err != nil {
		return err
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "conch-tests", "bin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close() // releases the lock
	if err := flock(lf); err != nil {
		return err
	}
	shared := filepath.Join(dir, "conch")
	if out, err := exec.Command("go", "build", "-o", shared, conchPackage).CombinedOutput(); err != nil {
		return fmt.Errorf("go build cmd/conch: %v\n%s", err, out)
	}
	// Copied by a child, never written by this process: a test forking
	// meanwhile would hold the write descriptor until its exec, and an
	// exec of path then fails with ETXTBSY (golang.org/issue/22315).
	if out, err := exec.Command("cp", shared, path).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the shared build: %v\n%s", err, out)
	}
	return nil
}

// moduleRoot is the directory of the go.mod above the working directory
// (a test binary runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
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
