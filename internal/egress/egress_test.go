//go:build linux

package egress_test

import (
	"testing"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/netpolicy"
)

func TestPublicByName(t *testing.T) {
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}})
	netlab.SetHost(t, "api.example.test", netlab.Public[0])
	out, errOut, code := s.run(t, curl("api.example.test", netlab.HTTPPort))
	if code != 0 || out != "hello from 203.0.113.10" {
		t.Fatalf("curl: %d %q %q", code, out, errOut)
	}
}
