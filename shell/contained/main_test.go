//go:build linux

package contained_test

import (
	"os"
	"testing"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/testutil"
)

// initEnv makes the test binary the init (what `conch __init` runs)
// instead of running the tests.
const initEnv = "CONTAINED_TEST_INIT"

func TestMain(m *testing.M) {
	if os.Getenv(initEnv) != "" {
		os.Exit(nsinit.Main())
	}
	testutil.VerifyTestMain(m)
}

// initOptions start this test binary as the init. Under -race, a process
// sleeps a second at exit unless GORACE says otherwise.
func initOptions() *nsinit.Options {
	return &nsinit.Options{Env: []string{initEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr}
}
