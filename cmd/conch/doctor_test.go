//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// doctorLine is the shape of every line of conch doctor, by what it
// reports.
var doctorLine = map[string]*regexp.Regexp{
	"provider":        regexp.MustCompile(`^(auto|local|contained)$`),
	"bash":            regexp.MustCompile(`^(\d+\.\d+\.\d+\S* \(/\S+/bash\)|none \(.+\))$`),
	"user namespaces": regexp.MustCompile(`^(yes|no \(.+\))$`),
	"pid namespaces":  regexp.MustCompile(`^(yes|no \(.+\))$`),
	"cgroup v2":       regexp.MustCompile(`^(/\S+ \((not )?writable\)|not mounted)$`),
	"cgroup limits":   regexp.MustCompile(`^pids: (cgroup v[12] /\S+|unavailable \(.+\)); memory: (cgroup v[12] /\S+|unavailable \(.+\))$`),
	"landlock":        regexp.MustCompile(`^(ABI [1-9]\d*|none \(landlock: .+\))$`),
	"seccomp":         regexp.MustCompile(`^(yes|no)$`),
	"containment":     regexp.MustCompile(`^(none \(off; this host would allow: (pid-namespace(, cgroup)?|none \(.+\))\)|pid-namespace(, cgroup)?|none \(.+\))$`),
	"sandbox":         regexp.MustCompile(`^(none \(.+\)|(read-only|workspace-write|full-access), network (on|public|allowlist|off)( \(not enforced: .+\))?)$`),
	"network": regexp.MustCompile(`^((public|allowlist) \(a network namespace per session, its only way out conch's user-space TCP/IP stack \(gVisor\) on a TUN device; DNS answered by conch; /dev/net/tun mode 0[0-7]{3}\)|` +
		`off \(an empty network namespace per session\)|on \(the host's network as it is, no policy; conch's own server port included\)|on \(the default public cannot be enforced: .+\)|on \(containment .+\)|none \(.+\))$`),
	"cache layer": regexp.MustCompile(`^((overlay|copy \(overlayfs: .+\)) in /\S+|none \(.+\))$`),
	"mcp client":  regexp.MustCompile(`^(none configured for conch|(Claude Code|Codex|Cursor|Claude Desktop|Zed) \(/.+\))$`),
}

// doctorHome is a home directory holding the configuration files of
// several MCP clients; those of Claude Code, Codex and Zed name conch,
// Cursor's names another server. It is readable by everyone, for the
// unprivileged run.
func doctorHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "conch-doctor-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	files := map[string]string{
		".claude.json":              `{"projects": {"/src/app": {"mcpServers": {"shell": {"type": "stdio", "command": "/usr/local/bin/conch", "args": ["serve"]}}}}}`,
		".codex/config.toml":        "model = \"o3\"\n[mcp_servers.conch]\ncommand = \"conch\"\nargs = [\"serve\"]\nenv = { A = \"b\" }\n",
		".cursor/mcp.json":          `{"mcpServers": {"fs": {"command": "npx", "args": ["conch-lookalike"]}}}`,
		".config/zed/settings.json": "// Zed settings\n{\n  \"theme\": \"One Dark\", /* a comment */\n  \"context_servers\": {\n    \"bash\": {\"command\": {\"path\": \"/opt/conch\", \"args\": [\"serve\"]}},\n  },\n}\n",
	}
	for name, text := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	return home
}

// runDoctor runs the built conch doctor in home with env added, and
// returns its lines by what they report (mcp client lines in order) and
// its exit status. Every line must have its shape.
func runDoctor(t *testing.T, home string, asNobody bool, env ...string) (map[string][]string, int) {
	t.Helper()
	return runDoctorCmd(t, home, asNobody, nil, env...)
}

// runDoctorCmd is runDoctor with the command run under wrap (see
// withoutUserNS), when not nil.
func runDoctorCmd(t *testing.T, home string, asNobody bool, wrap func(*exec.Cmd), env ...string) (map[string][]string, int) {
	t.Helper()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := testutil.Conch(t, marker, "doctor")
	if wrap != nil {
		wrap(cmd)
	}
	if asNobody {
		testutil.Unprivileged(t, cmd)
	}
	cmd.Dir = home
	cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "CODEX_HOME=")
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("conch doctor: %v", err)
	}
	if errb.Len() > 0 {
		t.Errorf("conch doctor wrote to stderr:\n%s", errb.String())
	}
	lines := map[string][]string{}
	for l := range strings.Lines(out.String()) {
		what, finding, ok := strings.Cut(strings.TrimSuffix(l, "\n"), ": ")
		re := doctorLine[what]
		if !ok || re == nil || !re.MatchString(finding) {
			t.Errorf("line %q: not of the expected shape", l)
			continue
		}
		lines[what] = append(lines[what], finding)
	}
	for what := range doctorLine {
		if n := len(lines[what]); n == 0 || (what != "mcp client" && n > 1) {
			t.Errorf("%d %q lines in:\n%s", n, what, out.String())
		}
	}
	return lines, cmd.ProcessState.ExitCode()
}

// TestDoctor: one line per finding, the clients that name conch reported
// by path (and the one that does not, not), exit status 0 on this host.
func TestDoctor(t *testing.T) {
	t.Parallel()
	home := doctorHome(t)
	lines, code := runDoctor(t, home, false)
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	want := []string{
		"Claude Code (" + filepath.Join(home, ".claude.json") + ")",
		"Codex (" + filepath.Join(home, ".codex", "config.toml") + ")",
		"Zed (" + filepath.Join(home, ".config", "zed", "settings.json") + ")",
	}
	if got := lines["mcp client"]; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("mcp clients:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.HasPrefix(lines["bash"][0], "none") {
		t.Errorf("bash: %s, want this host's bash", lines["bash"][0])
	}
}

// TestDoctorNoClients: a home without client files says so.
func TestDoctorNoClients(t *testing.T) {
	t.Parallel()
	lines, _ := runDoctor(t, t.TempDir(), false)
	if got := lines["mcp client"]; len(got) != 1 || got[0] != "none configured for conch" {
		t.Errorf("mcp client lines %q", got)
	}
}

// TestDoctorWithoutBash: the local provider cannot run a command without
// bash, so doctor says so and exits 1.
func TestDoctorWithoutBash(t *testing.T) {
	t.Parallel()
	lines, code := runDoctor(t, t.TempDir(), false, "PATH="+t.TempDir())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if got := lines["bash"]; len(got) != 1 || got[0] != "none (bash not found in PATH)" {
		t.Errorf("bash line %q", got)
	}
}

// TestDoctorUnprivileged: as uid 65534 the cgroup that root may write is
// reported as not writable, and the clients of the user's home are still
// found.
func TestDoctorUnprivileged(t *testing.T) {
	t.Parallel()
	home := doctorHome(t)
	root, _ := runDoctor(t, home, false)
	nobody, code := runDoctor(t, home, true)
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if len(nobody["mcp client"]) != 3 {
		t.Errorf("mcp clients as nobody: %q", nobody["mcp client"])
	}
	// The default sandbox holds for nobody too, although its temp dir
	// (the test's, root's and private) is out of nobody's reach.
	for _, what := range []string{"containment", "sandbox"} {
		if r, n := root[what], nobody[what]; len(r) == 1 && !strings.HasPrefix(r[0], "none") && (len(n) != 1 || strings.HasPrefix(n[0], "none")) {
			t.Errorf("%s as nobody: %q; as root: %q", what, n, r)
		}
	}
	rootCg, nobodyCg := root["cgroup v2"][0], nobody["cgroup v2"][0]
	dir, _, _ := strings.Cut(rootCg, " (")
	if fi, err := os.Stat(dir); err == nil && strings.HasSuffix(rootCg, "(writable)") && fi.Mode().Perm()&0o002 == 0 {
		if !strings.HasSuffix(nobodyCg, "(not writable)") {
			t.Errorf("cgroup v2 as nobody: %s; as root: %s", nobodyCg, rootCg)
		}
	}
}
