package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/conch-dev/conch/shell/local"
)

const doctorUsage = `Usage: conch doctor [flags]

Print what this host gives conch, one "<what>: <finding>" line each: the
bash that commands run in, user and PID namespaces, cgroup v2, Landlock,
seccomp, the containment and sandbox commands would get, and each MCP
client configuration file that names a conch server. The flags are
those of conch serve, whose settings are checked as serve would.
--host NAME asks a configured remote host instead: conch connects to it
as serve would and prints what its agent enforces there.

Exit status:
  0   the configured provider can run commands as configured (the
      default containment and sandbox degrade where the host cannot
      enforce them: the containment and sandbox lines say so)
  1   it cannot (no bash that runs, or --containment require or a
      sandbox given by flag or configuration that this host cannot
      enforce)
  2   a usage error or a bad configuration file

Flags:
`

// doctorCommand is `conch doctor`. The configured mode is the executor
// as conch serve would build it: the local provider needs nothing of the
// host but a bash that runs; containment (--containment require, or a
// sandbox that restricts) needs an init the host allows, and doctor
// starts one to find out. --containment auto never fails: it falls back.
func doctorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	hostName, args := doctorHostArg(args)
	fs := flag.NewFlagSet("conch doctor", flag.ContinueOnError)
	var c config
	c.addFlags(fs, 45000, slog.LevelInfo)
	serveFlags(fs)
	if _, code, ok := parseFlags(fs, args, doctorUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "conch doctor: unexpected argument %q\nRun 'conch doctor --help' for usage.\n", fs.Arg(0))
		return exitUsage
	}
	if hostName != "" {
		return doctorHost(ctx, &c, hostName, stdout, stderr)
	}
	if err := c.applyProvider(); err != nil {
		fmt.Fprintf(stderr, "conch doctor: %v\n", err)
		return exitUsage
	}
	bash, bashErr := bashVersion(ctx)
	if bashErr != nil {
		bash = "none (" + bashErr.Error() + ")"
	}
	host, enf, enforceable := hostLines(&c)
	// The provider built; the one asked for when none could be.
	provider := enf.provider
	if !enforceable {
		provider = c.provider.v
	}
	lines := append([][2]string{{"provider", provider}, {"bash", bash}}, host...)
	clients := mcpClientFiles()
	for _, f := range clients {
		lines = append(lines, [2]string{"mcp client", f.client + " (" + f.path + ")"})
	}
	if len(clients) == 0 {
		lines = append(lines, [2]string{"mcp client", "none configured for conch"})
	}
	for _, l := range lines {
		fmt.Fprintf(stdout, "%s: %s\n", l[0], l[1])
	}
	if bashErr != nil || !enforceable {
		return 1
	}
	return 0
}

// enforcementOf builds c's executor, closes it, and returns what it
// enforced; ok is false when it could not be built.
func enforcementOf(c *config) (enf enforcement, ok bool) {
	ex, enf, err := c.executor(&local.Options{Cwd: c.cwd}, nil)
	if err != nil {
		cause := "none (" + err.Error() + ")"
		return enforcement{containment: cause, sandbox: cause, network: cause}, false
	}
	ex.Close()
	return enf, true
}

// bashVersion runs the bash the local provider would run (bash in PATH)
// and returns "<version> (<path>)".
func bashVersion(ctx context.Context) (string, error) {
	path, err := exec.LookPath("bash")
	if err != nil {
		return "", fmt.Errorf("bash not found in PATH")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", `printf %s "$BASH_VERSION"`)
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return string(out) + " (" + path + ")", nil
}

// clientFile is an MCP client's configuration file that names a conch
// server.
type clientFile struct{ client, path string }

// mcpClientFiles returns the client configuration files, in the user's
// home and configuration directories and in the current directory, that
// name a conch server: a server entry whose name is "conch" or whose
// command's base name is "conch".
func mcpClientFiles() []clientFile {
	home, _ := os.UserHomeDir()
	cfg, _ := os.UserConfigDir()
	codex := os.Getenv("CODEX_HOME")
	if codex == "" && home != "" {
		codex = filepath.Join(home, ".codex")
	}
	type candidate struct {
		client, path string
		read         func([]byte) (bool, error)
	}
	var cands []candidate
	add := func(client, dir string, read func([]byte) (bool, error), elem ...string) {
		if dir != "" {
			cands = append(cands, candidate{client, filepath.Join(append([]string{dir}, elem...)...), read})
		}
	}
	add("Claude Code", home, jsonServers("mcpServers", "projects.*.mcpServers"), ".claude.json")
	add("Claude Code", ".", jsonServers("mcpServers"), ".mcp.json")
	add("Codex", codex, tomlServers, "config.toml")
	add("Cursor", home, jsonServers("mcpServers"), ".cursor", "mcp.json")
	add("Cursor", ".", jsonServers("mcpServers"), ".cursor", "mcp.json")
	add("Claude Desktop", cfg, jsonServers("mcpServers"), "Claude", "claude_desktop_config.json")
	add("Zed", cfg, jsonServers("context_servers", "agent_servers"), "zed", "settings.json")
	var found []clientFile
	for _, c := range cands {
		data, err := os.ReadFile(c.path)
		if err != nil {
			continue
		}
		if ok, err := c.read(data); err == nil && ok {
			abs, err := filepath.Abs(c.path)
			if err != nil {
				abs = c.path
			}
			found = append(found, clientFile{c.client, abs})
		}
	}
	return found
}

// jsonServers reads a JSON (or Zed's JSON with comments) configuration
// whose server tables sit at the given dotted paths ("*" matches every
// key) and reports whether one of them is a conch server.
func jsonServers(paths ...string) func([]byte) (bool, error) {
	return func(data []byte) (bool, error) {
		var doc any
		if err := json.Unmarshal(stripJSONC(data), &doc); err != nil {
			return false, err
		}
		for _, p := range paths {
			for _, servers := range lookup(doc, strings.Split(p, ".")) {
				if hasConch(servers) {
					return true, nil
				}
			}
		}
		return false, nil
	}
}

// tomlServers reads Codex's config.toml, whose servers are [mcp_servers.<name>].
func tomlServers(data []byte) (bool, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return false, err
	}
	return hasConch(doc["mcp_servers"]), nil
}

// lookup returns the values at path under v.
func lookup(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if path[0] != "*" {
		return lookup(m[path[0]], path[1:])
	}
	var out []any
	for _, sub := range m {
		out = append(out, lookup(sub, path[1:])...)
	}
	return out
}

// hasConch reports whether a table of servers by name holds conch.
func hasConch(servers any) bool {
	m, _ := servers.(map[string]any)
	for name, s := range m {
		if strings.EqualFold(name, "conch") {
			return true
		}
		entry, _ := s.(map[string]any)
		cmd, _ := entry["command"].(string)
		if nested, ok := entry["command"].(map[string]any); ok { // Zed: "command": {"path": …}
			cmd, _ = nested["path"].(string)
		}
		if filepath.Base(cmd) == "conch" {
			return true
		}
	}
	return false
}

// stripJSONC removes // and /* */ comments and trailing commas outside
// strings, so that Zed's settings file decodes as JSON.
func stripJSONC(data []byte) []byte {
	var out bytes.Buffer
	inString := false
	for i := 0; i < len(data); i++ {
		b := data[i]
		switch {
		case inString:
			out.WriteByte(b)
			if b == '\\' && i+1 < len(data) {
				i++
				out.WriteByte(data[i])
			} else if b == '"' {
				inString = false
			}
		case b == '"':
			inString = true
			out.WriteByte(b)
		case b == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case b == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			if end < 0 {
				i = len(data)
			} else {
				i += end + 3
			}
			out.WriteByte(' ')
		case b == ',':
			rest := bytes.TrimLeft(data[i+1:], " \t\r\n")
			if len(rest) > 0 && (rest[0] == '}' || rest[0] == ']') {
				continue
			}
			out.WriteByte(b)
		default:
			out.WriteByte(b)
		}
	}
	return out.Bytes()
}
