package main

import (
	"encoding/json"
	"flag"
	"log/slog"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestHostsConfig: [hosts.<name>] tables configure remote hosts, conch
// config shows them, and bad ones are refused with file, line and key.
func TestHostsConfig(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	p := writeConfig(t, "timeout_ms = 300\n\n[hosts.gpu1]\nssh = \"me@gpu1.example:2222\"\ncwd = \"/srv/train\"\n\n[hosts.build]\nssh = \"buildbox\"\n")
	stdout, stderr, code := runConch(t, marker, "config", "--config", p)
	if code != 0 {
		t.Fatalf("conch config: exit %d, stderr %q", code, stderr)
	}
	for _, line := range []string{
		`hosts.gpu1.ssh = "me@gpu1.example:2222"  # ` + p + ":4",
		`hosts.build.ssh = "buildbox"  # ` + p + ":8",
		`hosts.gpu1.cwd = "/srv/train"  # ` + p + ":5",
	} {
		if !strings.Contains(stdout, line+"\n") {
			t.Errorf("conch config lacks %q:\n%s", line, stdout)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"[hosts.gpu1]\nport = 22\n", ":2: hosts.gpu1.port: unknown key (a host takes ssh and cwd)"},
		{"[hosts.local]\nssh = \"x\"\n", `:2: hosts.local.ssh: "local" is this machine; name the host otherwise`},
		{"[hosts.gpu1]\nssh = [\"a\"]\n", ":2: hosts.gpu1.ssh: takes one value, not a list"},
	} {
		p := writeConfig(t, c.text)
		_, stderr, code := runConch(t, marker, "config", "--config", p)
		if code != 2 || !strings.Contains(stderr, "config "+p+c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.text, code, stderr, c.want)
		}
	}
}

// TestHostsBuild: configured hosts give the bash tool its host parameter;
// a cwd for a host that is not configured is refused.
func TestHostsBuild(t *testing.T) {
	var c config
	fs := flag.NewFlagSet("conch serve", flag.ContinueOnError)
	c.addFlags(fs, 0, slog.LevelInfo)
	if err := fs.Parse([]string{"--host", "gpu1=me@127.0.0.1:1", "--host-cwd", "gpu1=/srv"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.build(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var schema struct {
		Properties map[string]struct{ Enum []string } `json:"properties"`
	}
	json.Unmarshal(st.tools.Tools()[0].InputSchema, &schema)
	if got := schema.Properties["host"].Enum; strings.Join(got, ",") != "local,gpu1" {
		t.Errorf("host enum %q", got)
	}

	var bad config
	fs = flag.NewFlagSet("conch serve", flag.ContinueOnError)
	bad.addFlags(fs, 0, slog.LevelInfo)
	fs.Parse([]string{"--host-cwd", "gpu2=/srv"})
	if _, err := bad.build(nil); err == nil || err.Error() != "--host-cwd gpu2: no host gpu2 is configured" {
		t.Errorf("build with a cwd for no host: %v", err)
	}
}
