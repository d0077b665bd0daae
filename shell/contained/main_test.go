//go:build linux

package contained_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/testutil"
)

// initEnv makes the test binary the init (what `conch __init` runs)
// instead of running the tests.
const initEnv = "CONTAINED_TEST_INIT"

// initLogEnv, set for an init, names a file to which the init appends a
// line as it starts, with its pid: the count of inits an executor
// started.
const initLogEnv = "CONTAINED_TEST_INIT_LOG"

func TestMain(m *testing.M) {
	if os.Getenv(initEnv) != "" {
		if log := os.Getenv(initLogEnv); log != "" {
			f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				os.Exit(3)
			}
			// Its pid outside: /proc is still the host's here.
			self, _ := os.Readlink("/proc/self")
			fmt.Fprintf(f, "init %s\n", self)
			f.Close()
		}
		os.Exit(nsinit.Main())
	}
	testutil.VerifyTestMain(m)
}

// initOptions start this test binary as the init. Under -race, a process
// sleeps a second at exit unless GORACE says otherwise.
func initOptions() *nsinit.Options {
	return &nsinit.Options{Env: []string{initEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr}
}
