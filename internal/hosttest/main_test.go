//go:build linux

package hosttest_test

import (
	"os"
	"testing"

	"github.com/conch-dev/conch/internal/hosttest"
	"github.com/conch-dev/conch/internal/testutil"
)

// TestMain removes the conch binary the tests built and fails the run if a
// goroutine leaked.
func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// conchBinary is the conch the hosts run: this tree's, or the binary
// CONCH_TEST_BINARY names (to show what a build from elsewhere, say an
// older one, gives the hosts' models). It skips unless the host tests are
// on (hosttest.Require).
func conchBinary(t *testing.T) string {
	t.Helper()
	hosttest.Require(t)
	if bin := os.Getenv("CONCH_TEST_BINARY"); bin != "" {
		return bin
	}
	return testutil.ConchBinary(t)
}
