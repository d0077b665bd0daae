//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// bypassConfig allows what a user would call harmless and asks for the
// rest: the configuration under which each line of bypassRows said allow
// and deleted the file victim, before docs/rules.md closed it.
const bypassConfig = `[rules]
deny = ["Bash(rm:*)"]
allow = ["Bash(ls:*)", "Bash(cat:*)", "Bash(cp:*)", "Bash(mkdir:*)", "Bash(echo:*)", "Bash(printf:*)", "Bash(test:*)",
  "Bash(mapfile:*)", "Bash(hash:*)", "Bash(shopt:*)", "Bash(alias:*)", "Bash(read:*)", "Bash(compgen:*)",
  "Bash(git status)", "Bash(git diff:*)"]
unmatched = "ask"
`

// bypassRow is a command line that deleted victim, with the simple
// command and the reason it now asks for.
type bypassRow struct {
	line, command, reason string
}

// bypassRows are the bypasses of issue 19 item 14, each as a model would
// send it in ws (a git repository with a tracked file changed).
func bypassRows(ws string) []bypassRow {
	const evil = "mkdir -p evil && cp /bin/rm evil/ls; "
	return []bypassRow{
		{"cp /bin/rm ./ls; ./ls -f victim", "./ls -f victim", "no rule matches"},
		{"mkdir -p bin && cp /bin/rm bin/cat; " + ws + "/bin/cat victim", ws + "/bin/cat victim", "no rule matches"},
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm -f victim; false' git status", "git status", "assignment to GIT_CONFIG_COUNT"},
		{`GIT_CONFIG_PARAMETERS="'core.fsmonitor'='rm -f victim; false'" git status`, "git status", "assignment to GIT_CONFIG_PARAMETERS"},
		{"GIT_EXTERNAL_DIFF='rm -f victim; true' git diff", "git diff", "assignment to GIT_EXTERNAL_DIFF"},
		{"x='a[$(rm -f victim)]'; echo $((x))", "echo $((x))", "dynamic command"},
		{"x='a[$(rm -f victim)]'; let y=x", "let y=x", "dynamic command"},
		{"declare -i y; y='a[$(rm -f victim)]'", "declare -i y", "dynamic command"},
		{"test -v 'a[$(rm -f victim)]'", "test -v a[$(rm -f victim)]", "dynamic command"},
		{"[[ -v 'a[$(rm -f victim)]' ]]", "[[ -v 'a[$(rm -f victim)]' ]]", "dynamic command"},
		{`x='$(rm -f victim)'; echo "${x@P}"`, `echo "${x@P}"`, "dynamic command"},
		{"printf 'a\\n' | mapfile -C 'rm -f victim; :' -c 1 arr", "mapfile -C rm -f victim; : -c 1 arr", "dynamic command"},
		{"hash -p /bin/rm ls; ls -f victim", "hash -p /bin/rm ls", "dynamic command"},
		{"shopt -s expand_aliases; alias ls='rm -f'\nls victim", "alias ls=rm -f", "dynamic command"},
		{"compgen -W '$(rm -f victim)' x", "compgen -W $(rm -f victim) x", "dynamic command"},
		{evil + `printf -v PATH %s "$PWD/evil"; ls -f victim`, `printf -v PATH %s "$PWD/evil"`, "assignment to PATH"},
		{evil + `declare -n p=PATH; p=$PWD/evil; ls -f victim`, "declare -n p=PATH", "assignment to PATH"},
		{evil + `read PATH <<< "$PWD/evil"; ls -f victim`, "read PATH", "assignment to PATH"},
	}
}

// TestCheckBypasses: conch check decides each bypass as docs/rules.md
// says, and the commands beside them as before.
func TestCheckBypasses(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, bypassConfig)
	check := func(line string) (verdict, last string) {
		out, stderr, code := testutil.RunConch(t, "", "check", "--config", cfg, "--", line)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if want := map[string]int{"allow": 0, "ask": 3, "deny": 4}[lines[0]]; code != want || stderr != "" {
			t.Errorf("conch check %q: exit %d, stderr %q", line, code, stderr)
		}
		return lines[0], lines[len(lines)-1]
	}
	for _, row := range bypassRows("/w") {
		verdict, last := check(row.line)
		if want := row.reason + ": " + strings.ReplaceAll(row.command, "\n", `\n`); verdict != "ask" || last != want {
			t.Errorf("conch check %q: %s, %q; want ask, %q", row.line, verdict, last, want)
		}
	}
	for line, want := range map[string]string{
		"/bin/rm -f victim":            "deny\trule Bash(rm:*): /bin/rm -f victim",
		"ls -la && git status":         "allow\trule Bash(ls:*): ls -la",
		"n=2; echo $((n * 2))":         "allow\trule Bash(echo:*): echo $((n * 2))",
		"read -r line < f; echo $line": "allow\trule Bash(read:*): read -r line",
		"GIT_AUTHOR_NAME=x git status": "allow\trule Bash(git status): git status",
	} {
		if verdict, last := check(line); verdict+"\t"+last != want {
			t.Errorf("conch check %q: %s, %q; want %q", line, verdict, last, want)
		}
	}
}

// TestServeRuleBypasses runs each bypass through conch serve --http, as
// root and as uid 65534, with a client that cannot ask: each is refused
// with the text of docs/rules.md#in-a-tool-call, and victim survives.
func TestServeRuleBypasses(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			s := newAttackSetup(t, nobody)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
			writeFile(t, s.config, bypassConfig)
			// A commit and a change, for git diff to show.
			for _, args := range [][]string{{"config", "user.name", "t"}, {"config", "user.email", "t@example.com"},
				{"add", "f"}, {"commit", "-qm", "init"}} {
				if args[0] == "add" {
					writeFile(t, filepath.Join(s.wsB, "f"), "a\n")
				}
				if out, err := exec.Command("git", append([]string{"-c", "safe.directory=*", "-C", s.wsB}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v: %s", args, err, out)
				}
			}
			writeFile(t, filepath.Join(s.wsB, "f"), "b\n")
			if nobody {
				chownTree(t, s.home)
				chownTree(t, s.wsB)
			}
			srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
			b := s.connect(t, srv, s.wsB)
			defer b.Close()
			victim := filepath.Join(s.wsB, "victim")
			for _, row := range bypassRows(s.wsB) {
				writeFile(t, victim, "precious\n")
				if nobody {
					chownTree(t, victim)
				}
				want := "Error: not run: " + row.command + " needs approval (" + row.reason + "), but this client cannot ask the user; allow it in the conch configuration or run it yourself"
				if got := text(t, callTool(t, b, "bash", bash(row.line))); got != want {
					t.Errorf("%q:\n got %q\nwant %q", row.line, got, want)
				}
				if _, err := os.Stat(victim); err != nil {
					t.Errorf("%q deleted victim: %v", row.line, err)
				}
			}
			// What the rules allow still runs.
			if got := text(t, callTool(t, b, "bash", bash("n=2; echo $((n * 2)); cat f; git diff --stat"))); got != "4\nb\n f | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n" {
				t.Errorf("an allowed line: %q", got)
			}
		})
	}
}

// scrubEnv are server variables of issue 19 item 15, each of which
// reached commands: a name or a value the scrub now removes.
var scrubEnv = []string{
	"GITHUB_PAT=pat-value-1", "DB_PASS=pass-value-2", "MY_PASS=pass-value-3", "AUTHORIZATION=Basic auth-value-4",
	"BEARER=bearer-value-5", "SESSION=session-value-6", "SESSIONID=session-value-7", "PRIVATE=private-value-8",
	"NPM=npm_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "STRIPE=sk_live_abcdefghijklmnopqrstuvwx",
	"STRIPE_R=rk_live_abcdefghijklmnopqrstuvwx", "STRIPE_T=sk_test_abcdefghijklmnopqrstuvwx",
	"AZURE=DefaultEndpointsProtocol=https;AccountName=a;AccountKey=account-key-value-9==;EndpointSuffix=x",
	"DOCKER_HOST=tcp://build.invalid:2376",
}

// keptEnv must still reach commands.
var keptEnv = []string{
	"GIT_AUTHOR_NAME=A U Thor", "XDG_SESSION_ID=7", "PYTHONPATH=src", "GIT_PATCH_LEVEL=1",
	"GIT_SSH_COMMAND=ssh -o IdentitiesOnly=yes",
}

// TestServeScrubAndClean: a command of conch serve --http, as root and
// as uid 65534, sees none of scrubEnv and all of keptEnv (and PATH); and
// the controls it prints to hide text on a terminal (BS, BEL, VT, FF,
// DEL, 8-bit CSI, OSC and ST) do not reach the result (issue 19 item 16).
func TestServeScrubAndClean(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			s := newAttackSetup(t, nobody)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
			env := append(append(s.env(), scrubEnv...), keptEnv...)
			srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, env...)
			b := s.connect(t, srv, s.wsB)
			defer b.Close()
			got := text(t, callTool(t, b, "bash", bash("env")))
			for _, kv := range scrubEnv {
				name, value, _ := strings.Cut(kv, "=")
				if strings.Contains(got, name+"=") || strings.Contains(got, value) {
					t.Errorf("%s reached the command", name)
				}
			}
			for _, kv := range append(keptEnv, "PATH=") {
				if !strings.Contains("\n"+got, "\n"+kv) {
					t.Errorf("%s did not reach the command", kv)
				}
			}
			// Text around the controls keeps them under a tenth of the
			// output, which would otherwise be binary output, named, not shown.
			pad := strings.Repeat("ordinary text ", 12)
			hide := `printf 'safe\b\b\b\bEVIL\a\v\f\x7f|\xc2\x9b2J|\xc2\x9d0;title\xc2\x9c|\tend ` + pad + `\n'`
			if got := text(t, callTool(t, b, "bash", bash(hide))); got != "safeEVIL|||\tend "+pad+"\n" {
				t.Errorf("controls in the result: %q", got)
			}
		})
	}
}

// TestServeSlowloris: while 320 clients (more than the 256 connections
// conch serve --http holds at once) each send a request line and then a
// header byte every half second, reconnecting whenever they are cut, as
// a slowloris does, legitimate clients are each answered within 5 s (on
// main, 3 of 7 timed out: the slow ones held every connection until the
// 10 s header timeout). As root and as uid 65534.
func TestServeSlowloris(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			s := newAttackSetup(t, nobody)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
			srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
			addr, token := srv.listen(), srv.fileToken()

			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer stop()
			const slow = 320
			for range slow {
				wg.Go(func() {
					for ctx.Err() == nil {
						slowloris(ctx, addr)
					}
				})
			}
			// The server holds as many connections as it will.
			testutil.WaitFor(t, 20*time.Second, "conch to hold 256 connections", func() bool {
				return serverSockets(t, srv.cmd.Process.Pid) >= 256
			})
			hc := &http.Client{Timeout: 5 * time.Second}
			for i := range 7 {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url, strings.NewReader(
					`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
				req.Close = true
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+token)
				start := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					t.Errorf("legitimate request %d during the slowloris: %v", i, err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("legitimate request %d: %s", i, resp.Status)
				}
				t.Logf("legitimate request %d answered in %v", i, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// slowloris connects to addr, sends a request line and then a header
// byte every half second until the server cuts it (then it returns at
// once, for the caller to connect again) or ctx ends.
func slowloris(ctx context.Context, addr string) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		select { // out of ports or descriptors for a moment
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	cut := make(chan struct{})
	go func() {
		defer close(cut)
		io.Copy(io.Discard, c) // until the server closes the connection
	}()
	defer func() { <-cut }()
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Pad: ", addr); err != nil {
		return
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cut:
			return
		case <-tick.C:
		}
		if _, err := c.Write([]byte("a")); err != nil {
			return
		}
	}
}

// serverSockets counts the sockets process pid holds open.
func serverSockets(t *testing.T, pid int) int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
