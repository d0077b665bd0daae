//go:build linux

package local_test

import (
	"os"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		sigkillServer()
	}
	testutil.VerifyTestMain(m)
}
