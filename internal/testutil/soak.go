//go:build linux

package testutil

import (
	"os"
	"testing"
)

// SoakEnv is the environment variable that, set to 1, runs the soak tests
// at their full size: `CONCHTEST_SOAK=1 go test -race ./...`.
const SoakEnv = "CONCHTEST_SOAK"

// SoakSize returns how many rounds (commands, bytes…) a soak test runs:
// full with CONCHTEST_SOAK=1, short under -short, else def. The default
// keeps every promise tested in a run that fits a loaded 2-core machine;
// a leak that grows with the rounds shows there as well. The full size
// is for the rare interleavings only many rounds reach.
func SoakSize(short, def, full int) int {
	switch {
	case os.Getenv(SoakEnv) == "1":
		return full
	case testing.Short():
		return short
	}
	return def
}
