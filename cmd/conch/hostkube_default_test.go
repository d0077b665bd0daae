//go:build linux && !kube

package main

import (
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestKubeHostsNotBuilt: a conch built without the Kubernetes transport
// (the default build) refuses a Kubernetes host, saying how to build one
// that has it. Through the binary: a stack built in this process would
// make the test binary a child subreaper whose close kills every orphan
// it adopted, the conmon of other tests' containers included.
func TestKubeHostsNotBuilt(t *testing.T) {
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	_, stderr, code := testutil.RunConch(t, marker, "run", "--host-kubernetes", "k=dev/box", "--", "true")
	const want = "conch run: host k: this conch was built without the Kubernetes transport; build it with `go build -tags kube ./cmd/conch`\n"
	if code != 2 || stderr != want {
		t.Errorf("conch run with a Kubernetes host: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}
