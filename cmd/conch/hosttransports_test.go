//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestHostTransportKeys: a host transport's keys live in host tables
// only (the registry, hosttransports.go): conch config prints none of
// their flags as a top-level key, and a file's top-level key named after
// one (host_image) is unknown, not a host.
func TestHostTransportKeys(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "[hosts.dev]\nimage = \"localhost/dev:1\"\nengine = \"podman\"\n")
	stdout, stderr, code := testutil.RunConch(t, marker, "config", "--config", p)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "host_") {
			t.Errorf("conch config prints a host flag as a top-level key: %q", line)
		}
	}
	if !strings.Contains(stdout, `hosts.dev.engine = "podman"  # `+p+":3\n") {
		t.Errorf("conch config lacks the template's engine:\n%s", stdout)
	}
	p = writeConfig(t, "host_image = [\"dev=localhost/dev:1\"]\n")
	_, stderr, code = testutil.RunConch(t, marker, "config", "--config", p)
	if want := "config " + p + ":1: host_image: unknown key"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("a top-level host_image: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}

// TestDoctorHostTransport: conch doctor --host names the host's
// transport in its words (each transport's record says them) before it
// connects; a host it cannot reach is exit status 1.
func TestDoctorHostTransport(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	stdout, stderr, code := testutil.RunConch(t, marker, "doctor", "--host", "s=me@127.0.0.1:1", "--host", "s")
	if want := "host: s (ssh me@127.0.0.1:1)\nagent: none ("; code != 1 || !strings.HasPrefix(stdout, want) {
		t.Errorf("conch doctor --host s: exit %d, stdout %q, stderr %q; want 1, %q", code, stdout, stderr, want)
	}
	_, stderr, code = testutil.RunConch(t, marker, "doctor", "--host", "s=me@127.0.0.1:1", "--host", "t")
	if want := "conch doctor: --host t: no host t is configured\n"; code != 2 || stderr != want {
		t.Errorf("conch doctor --host t: exit %d, stderr %q; want 2, %q", code, stderr, want)
	}
}
