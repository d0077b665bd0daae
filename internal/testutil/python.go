//go:build linux

package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// Python3 returns the absolute path of the python3 interpreter itself,
// for commands of tests that need Python, and fails t when there is
// none. The python3 found in PATH may be a version manager's shim (pyenv
// puts a bash script first in PATH) that runs several bash processes
// before Python starts: 0.1 s become 2.5 s at a load of 20, which blows
// the budget of a test waiting for a prompt, and the shim under /root is
// out of reach of a command run as another user. The interpreter
// reports its own path (sys.executable); it is asked once per test
// binary.
func Python3(t testing.TB) string {
	t.Helper()
	pythonOnce.Do(func() {
		var out []byte
		if out, pythonErr = exec.Command("python3", "-c", "import sys; print(sys.executable)").Output(); pythonErr != nil {
			return
		}
		if pythonPath = strings.TrimSpace(string(out)); !filepath.IsAbs(pythonPath) {
			pythonErr = &os.PathError{Op: "python3: sys.executable", Path: pythonPath, Err: os.ErrNotExist}
		}
	})
	if pythonErr != nil {
		t.Fatalf("testutil: python3 is needed for this test: %v", pythonErr)
	}
	return pythonPath
}
