package local_test

import (
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }
