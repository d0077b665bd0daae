//go:build linux

package hosttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// RunTimeout bounds one run of a host.
const RunTimeout = 5 * time.Minute

// Run is one run of a host: where, with what, and for which test marker.
type Run struct {
	// Dir is the working directory (Claude Code offers it to conch as its
	// root, so it is the session's working directory).
	Dir string
	// Marker is the test's marker (testutil.Marker): every process of the
	// run carries it, so that the test can check that none survives.
	Marker string
	// Env adds variables (CONCH_TOKEN for an HTTP server, say).
	Env []string
	// Prompt is the user's prompt (the fake model ignores it).
	Prompt string
	// Home is the host's HOME (its configuration: `claude mcp add`
	// writes there); "" means a fresh one for the run.
	Home string
}

// Output is what a host printed.
type Output struct {
	Stdout, Stderr string
	Elapsed        time.Duration
}

// env is the environment of a host run: only what it needs, a private
// HOME, the test's marker, and nothing that makes it talk to anyone but
// the fake (updaters, telemetry, error reports off).
func (r Run) env(t testing.TB, path string, extra ...string) []string {
	home := r.Home
	if home == "" {
		home = t.TempDir()
	}
	env := []string{
		"HOME=" + home,
		"PATH=" + path + ":/usr/local/bin:/usr/bin:/bin",
		"TMPDIR=" + t.TempDir(),
		"LANG=C.UTF-8",
		testutil.MarkerEnv + "=" + r.Marker,
	}
	return append(append(env, extra...), r.Env...)
}

// run runs bin with args and env in r.Dir, within RunTimeout; on the way
// out, the whole process group goes.
func run(t testing.TB, r Run, bin string, args []string, env []string) Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = r.Dir, env
	cmd.Stdin = nil // /dev/null: -p and exec read no more input from it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	o := Output{Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(start)}
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, o.Stdout, o.Stderr)
	}
	return o
}

// Claude is an installed Claude Code.
type Claude struct {
	Host string // Claude197 or Claude332
	bin  string
	path string // node_modules/.bin: first on PATH (Node.js 22 for 2.1.332)
}

// NewClaude installs host (Claude197 or Claude332) if needed.
func NewClaude(t testing.TB, host string) *Claude {
	t.Helper()
	modules := Install(t, host)
	bin := filepath.Join(modules, ".bin")
	return &Claude{Host: host, bin: filepath.Join(bin, "claude"), path: bin}
}

// Run runs, in print mode against api,
//
//	claude -p <prompt> --output-format json --mcp-config <mcpConfig> --strict-mcp-config --allowedTools mcp__conch <args…>
//
// mcpConfig is the JSON of --mcp-config; "" leaves out both MCP flags, for
// a server configured with `claude mcp add` (Command) in r.Home. It fails
// t when Claude Code fails.
func (c *Claude) Run(t testing.TB, api *Anthropic, r Run, mcpConfig string, args ...string) Output {
	t.Helper()
	all := []string{"-p", r.Prompt, "--output-format", "json"}
	if mcpConfig != "" {
		all = append(all, "--mcp-config", mcpConfig, "--strict-mcp-config")
	}
	all = append(append(all, "--allowedTools", "mcp__conch"), args...)
	return run(t, r, c.bin, all, r.env(t, c.path, claudeEnv(api.URL())...))
}

// Command runs `claude <args…>` (`claude mcp add …`, say) in r.Dir with
// r.Home, offline.
func (c *Claude) Command(t testing.TB, r Run, args ...string) Output {
	t.Helper()
	return run(t, r, c.bin, args, r.env(t, c.path, claudeEnv("http://127.0.0.1:9")...))
}

// claudeEnv keeps Claude Code at home: its model API is api, and no
// updater, telemetry, error report or other traffic goes out.
func claudeEnv(api string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + api,
		"ANTHROPIC_API_KEY=test-key-for-a-fake",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}

// Codex is an installed Codex CLI.
type Codex struct {
	bin  string
	path string
}

// NewCodex installs Codex CLI (Codex171) if needed.
func NewCodex(t testing.TB) *Codex {
	t.Helper()
	modules := Install(t, Codex171)
	bin := filepath.Join(modules, ".bin")
	return &Codex{bin: filepath.Join(bin, "codex"), path: bin}
}

// CodexConfig is the part of config.toml that points Codex at a fake
// model: a provider of its own whose key is an environment variable, and
// the tool-output limit of the model it stands for (gpt-5.5 keeps 10,000
// tokens of a tool result; a model Codex does not know gets a far smaller
// limit, which would cut conch's results where no user's are cut).
func CodexConfig(api *OpenAI) string {
	return `model_provider = "fake"
model = "fake-model"
tool_output_token_limit = 10000

[model_providers.fake]
name = "fake"
base_url = "` + api.URL() + `"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
`
}

// Run runs `codex exec --skip-git-repo-check --json <prompt>` against api,
// with config.toml holding CodexConfig(api) and then servers (the
// [mcp_servers.conch] table). It fails t when Codex fails.
func (c *Codex) Run(t testing.TB, api *OpenAI, r Run, servers string) Output {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(CodexConfig(api)+"\n"+servers), 0o600); err != nil {
		t.Fatal(err)
	}
	return run(t, r, c.bin, []string{"exec", "--skip-git-repo-check", "--json", r.Prompt},
		r.env(t, c.path, "CODEX_HOME="+home, "FAKE_OPENAI_KEY=test-key-for-a-fake"))
}

// wallTime is what Codex puts before an MCP tool's output.
var wallTime = regexp.MustCompile(`^Wall time: \d+(\.\d+)? seconds\nOutput:\n`)

// CutWallTime takes Codex's "Wall time: <s> seconds\nOutput:\n" off the
// start of a result; ok is false when it is not there.
func CutWallTime(s string) (rest string, ok bool) {
	loc := wallTime.FindStringIndex(s)
	if loc == nil {
		return s, false
	}
	return s[loc[1]:], true
}

// Server is a `conch serve --http` the test started.
type Server struct {
	URL   string // http://127.0.0.1:<port>/mcp
	Token string
}

// ServeHTTP starts `<conch> serve --http 127.0.0.1:0 <args…>` in dir
// (the session's workspace when the client names no root: Codex names
// none) with CONCH_TOKEN set to a fresh token and the test's marker, and
// waits until it serves. It is stopped (SIGTERM) when the test ends.
func ServeHTTP(t testing.TB, conch, marker, dir string, args ...string) Server {
	t.Helper()
	token := strings.ReplaceAll(testutil.Marker(t), "_", "-")
	cmd := exec.Command(conch, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(testutil.Env(marker), "CONCH_TOKEN="+token, "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	urls := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			if m := serveURL.FindStringSubmatch(line); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		cmd.Wait()
		if t.Failed() {
			t.Logf("conch serve --http logs:\n%s", logs.String())
		}
	})
	select {
	case u := <-urls:
		return Server{URL: u, Token: token}
	case <-done:
		t.Fatalf("conch serve --http ended before serving")
	case <-time.After(30 * time.Second):
		t.Fatalf("conch serve --http did not serve within 30 s")
	}
	return Server{}
}

var serveURL = regexp.MustCompile(`msg="serving MCP over streamable HTTP" url=(\S+)`)

// JSON is v as JSON, for a host's configuration.
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
