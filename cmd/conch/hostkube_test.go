//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestKubeHostsConfig: `kubernetes`, `pod_template` and `context` keys
// configure Kubernetes hosts, conch config shows them, and bad ones are
// refused: a host of two transports, a target that is not
// namespace/pod[/container], a context for a host that is not a
// Kubernetes host.
func TestKubeHostsConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "[hosts.k1]\nkubernetes = \"dev/box/main\"\ncontext = \"staging\"\n\n[hosts.k2]\npod_template = \"/etc/pod.yaml\"\n")
	stdout, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{
		`hosts.k1.kubernetes = "dev/box/main"  # ` + p + ":2",
		`hosts.k1.context = "staging"  # ` + p + ":3",
		`hosts.k2.pod_template = "/etc/pod.yaml"  # ` + p + ":6",
	} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, stdout)
		}
	}
	p = writeConfig(t, "[hosts.k1]\nkubernetes = \"dev/box\"\npodman = \"b\"\n")
	_, stderr, code = testutil.RunConch(t, marker, "config", "--config", p)
	if want := ":3: hosts.k1.podman: host k1 is given two transports (a host is one of ssh, podman, docker, image, kubernetes or pod_template)"; code != 2 || !strings.Contains(stderr, "config "+p+want) {
		t.Errorf("two transports: exit %d, stderr %q; want %q", code, stderr, want)
	}
}
