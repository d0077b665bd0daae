//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/cachelayer"
	"github.com/conch-dev/conch/internal/testutil"
)

// spillPath finds the spill file a result's cut line names.
var spillPath = regexp.MustCompile(`full output: (/\S+)\]`)

// attackSetup is what TestAttack's server runs in: a home with a
// configuration file (the default file, under ~/.config), and a workspace
// for each session, B's holding a git repository; all owned by the user
// conch runs as.
type attackSetup struct {
	nobody         bool
	home, config   string
	wsA, wsB       string
	state, runtime string
	tmp            string // TMPDIR
	pty            string // a terminal of the host's (a user's shell, say)
	marker         string
	writable       string // the writable list of B's write markers

	// Repositories of B's workspace the bounded search of the sandbox's
	// plan does not reach (deeper than 7 levels, in node_modules), and
	// one whose index only one row uses.
	deep, nodeModules, outer string
	// sock is a unix socket outside the sandbox, listening.
	sock string
}

func newAttackSetup(t *testing.T, nobody bool) *attackSetup {
	t.Helper()
	home, wsA := sandboxDirs(t, nobody)
	s := &attackSetup{nobody: nobody, home: home, wsA: wsA, marker: testutil.Marker(t)}
	s.wsB = filepath.Join(filepath.Dir(home), "wsb")
	s.state = filepath.Join(filepath.Dir(home), "state")
	s.runtime = filepath.Join(filepath.Dir(home), "run")
	s.tmp = filepath.Join(filepath.Dir(home), "tmp")
	s.config = filepath.Join(home, ".config", "conch", "config.toml")
	writeFile(t, s.config, "# conch\ntimeout_ms = 120000\n")
	writeFile(t, filepath.Join(home, ".bashrc"), "# bashrc\n")
	for _, d := range []string{s.wsB, s.state, s.runtime, s.tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s.deep = filepath.Join(s.wsB, "a", "b", "c", "d", "e", "f", "g", "h", "deep")
	s.nodeModules = filepath.Join(s.wsB, "node_modules", "pkg")
	s.outer = filepath.Join(s.wsB, "outer")
	for _, dir := range []string{s.wsB, s.deep, s.nodeModules, s.outer} {
		git := exec.Command("git", "init", "-q", dir)
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
	}
	if err := os.Mkdir(filepath.Join(filepath.Dir(home), "sib"), 0o755); err != nil {
		t.Fatal(err)
	}
	// B's project file, which narrows nothing.
	writeFile(t, filepath.Join(s.wsB, ".conch", "config.toml"), "# project\n")
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	s.pty = slave.Name()
	if nobody {
		for _, d := range []string{home, s.wsB, s.state, s.runtime, s.tmp, filepath.Join(filepath.Dir(home), "sib")} {
			chownTree(t, d)
		}
		os.Chown(s.pty, testutil.UnprivilegedID, testutil.UnprivilegedID)
	}
	s.sock = filepath.Join(home, "agent.sock")
	l, err := net.Listen("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // never accepts: a connect completes in its backlog
	os.Chmod(s.sock, 0o777)
	return s
}

// writableRoots is the writable list of B's write markers, once the
// server made the missing cache directories: B's workspace, the temp
// dirs, and the caches under the cache layer, in cachelayer.Dirs' order.
func (s *attackSetup) writableRoots() string {
	return strings.Join(servedWritable(s.env(), s.wsB, s.tmp, "/tmp"), ", ")
}

// servedWritable is what a server run with env names as writable once it
// made the missing cache directories: roots, then the caches under the
// cache layer that exist, in cachelayer.Dirs' order.
func servedWritable(environ []string, roots ...string) []string {
	env := map[string]string{}
	for _, kv := range append(os.Environ(), environ...) { // the server's: this process's, then environ
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var caches []string
	for _, d := range cachelayer.Dirs(func(k string) string { return env[k] }) {
		if fi, err := os.Stat(d.Path); err == nil && fi.IsDir() && !slices.ContainsFunc(caches, func(c string) bool { return strings.HasPrefix(d.Path, c+"/") }) {
			caches = append(caches, d.Path)
		}
	}
	return append(roots, caches...)
}

// chownTree gives dir and everything under it to the unprivileged user.
func chownTree(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, testutil.UnprivilegedID, testutil.UnprivilegedID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// env is conch's environment: HOME, the configuration, the state and
// the runtime directory of the setup.
func (s *attackSetup) env() []string {
	return []string{"HOME=" + s.home, "XDG_CONFIG_HOME=" + filepath.Join(s.home, ".config"),
		"XDG_STATE_HOME=" + s.state, "TMPDIR=" + s.tmp, "XDG_RUNTIME_DIR=" + s.runtime}
}

// connect opens an MCP session over HTTP whose first root is ws.
func (s *attackSetup) connect(t *testing.T, srv *httpServe, ws string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c := newClient(serverOptions{roots: []*mcp.Root{{URI: "file://" + ws}}})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: withToken(srv.fileToken())}, legacyMCP)
	if err != nil {
		t.Fatalf("connect over http: %v", err)
	}
	return cs
}

// hostPid is the pid, in the host's /proc, of the process with the
// setup's marker running cmd.
func (s *attackSetup) hostPid(t *testing.T, cmd string) int {
	t.Helper()
	waitProcess(t, s.marker, -1, cmd)
	for _, p := range testutil.Processes(s.marker) {
		if testutil.Cmdline(p.Pid) == cmd {
			return p.Pid
		}
	}
	t.Fatalf("no process runs %s", cmd)
	return 0
}

// alive reports whether a process with the setup's marker runs cmd.
func (s *attackSetup) alive(cmd string) bool {
	for _, p := range testutil.Processes(s.marker) {
		if testutil.Cmdline(p.Pid) == cmd {
			return true
		}
	}
	return false
}

// TestAttack is README's attack table, run as a model would: the real
// binary, `conch serve --http` on the defaults (containment auto, sandbox
// workspace-write, network on) with a configuration file, two MCP
// sessions of the Go SDK's client, each with its own workspace (its
// first root). Session B, hostile, goes after the server, session A and
// the user's files, then tries to outlive its session and the server;
// what an honest command needs keeps working. As root and as uid 65534.
func TestAttack(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			testAttack(t, nobody)
		})
	}
}

func testAttack(t *testing.T, nobody bool) {
	s := newAttackSetup(t, nobody)
	t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
	srv := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
	server := srv.cmd.Process.Pid
	a, b := s.connect(t, srv, s.wsA), s.connect(t, srv, s.wsB)

	// Session A: a background sleep, and output over the cap, whose
	// result names its spill file.
	if got := text(t, callTool(t, a, "bash", bashBG("sleep 1041"))); got != "started background task bash-1" {
		t.Fatalf("A's background sleep: %q", got)
	}
	sleepA := s.hostPid(t, "sleep 1041")
	m := spillPath.FindStringSubmatch(text(t, callTool(t, a, "bash", bash("seq 1 400000"))))
	if m == nil {
		t.Fatal("A's long output names no spill file")
	}
	spillA := m[1]
	if _, err := os.Stat(spillA); err != nil {
		t.Fatalf("A's spill file: %v", err)
	}

	// The terminals a command sees are its init's own: none of the
	// host's, and a new one is the first of its own instance. Asked of A,
	// which runs no terminal of its own: B's rows run side by side, and
	// its tty rows open terminals in B's init, where the host's terminal's
	// name (/dev/pts/0 on a host with one terminal) may then be B's own.
	for _, c := range s.terminalRows() {
		if got := text(t, callTool(t, a, "bash", bash(c.command))); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.command, got, c.want)
		}
	}

	t.Run("B", func(rows *testing.T) {
		for _, c := range s.rows(t, server, " [s]erve --http", "notifications/message", sleepA, spillA) {
			rows.Run(c.name, func(t *testing.T) {
				t.Parallel()
				args := bash(c.command)
				if c.tty {
					args["tty"] = true
				}
				if got := text(t, callTool(t, b, "bash", args)); got != c.want {
					t.Errorf("%s:\n got %q\nwant %q", c.command, got, c.want)
				}
				if c.after != nil {
					c.after(t)
				}
			})
		}
	})
	if !s.alive("sleep 1041") {
		t.Error("A's sleep was killed")
	}
	s.userGit(t)

	// B reads its own spill file.
	m = spillPath.FindStringSubmatch(text(t, callTool(t, b, "bash", bash("seq 1 400000"))))
	if m == nil {
		t.Fatal("B's long output names no spill file")
	}
	if got := text(t, callTool(t, b, "bash", bash("head -1 "+m[1]))); got != "1\n" {
		t.Errorf("B reading its own spill file: %q", got)
	}

	// A fork loop that ignores SIGTERM, ended by task_kill.
	loop, beat := s.forkLoop(t)
	id := taskID(t, text(t, callTool(t, b, "bash", bashBG(loop))))
	testutil.WaitBeating(t, beat)
	if got, want := text(t, callTool(t, b, "task_kill", map[string]any{"task_id": id})), "killed task "+id+" [status: killed, exit code: 0]"; got != want {
		t.Errorf("task_kill of the fork loop: %q, want %q", got, want)
	}
	if testutil.Beating(t, beat) {
		t.Error("the fork loop runs after task_kill")
	}

	// An escapee of B's ends with B's session (an HTTP DELETE).
	escape := func(cs *mcp.ClientSession, n int) string {
		sleep := "sleep " + strconv.Itoa(n)
		if got := text(t, callTool(t, cs, "bash", bash("setsid nohup "+sleep+" >/dev/null 2>&1 &"))); got != "(no output)" {
			t.Errorf("the escapee: %q", got)
		}
		s.hostPid(t, sleep)
		return sleep
	}
	sleep := escape(b, 1043)
	if err := b.Close(); err != nil {
		t.Errorf("delete B's session: %v", err)
	}
	testutil.WaitFor(t, 5*time.Second, "B's escapee to end with its session", func() bool { return !s.alive(sleep) })

	// Another escapee, in a new session, ends with the server's SIGKILL;
	// and nothing reached the server's stdout.
	b2 := s.connect(t, srv, s.wsB)
	escape(b2, 1044)
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The clients' goroutines end with their sessions (the DELETEs fail:
	// the server is gone).
	a.Close()
	b2.Close()
	waitNoProcesses(t, s.marker, -1, 5*time.Second)
	err := <-srv.exited
	srv.exited <- err
	if srv.out.Len() > 0 {
		t.Errorf("the server's stdout: %q", srv.out.String())
	}
}

// forkLoop is testutil.ForkLoop with its beat file writable by the user
// conch runs as.
func (s *attackSetup) forkLoop(t *testing.T) (cmd, beat string) {
	t.Helper()
	cmd, beat = testutil.ForkLoop(t)
	if s.nobody {
		// The test's temporary directories (two levels) are root's, 0700.
		for _, d := range []string{filepath.Dir(beat), filepath.Dir(filepath.Dir(beat))} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(beat, testutil.UnprivilegedID, testutil.UnprivilegedID); err != nil {
			t.Fatal(err)
		}
	}
	return cmd, beat
}

// attackRow is a command session B runs, and its whole result text.
type attackRow struct {
	name, command string
	tty           bool
	want          string
	after         func(t *testing.T) // more checks, after the command
}

// rows are the attack table's rows for session B of a server whose pid
// is server: serverLine is a grep pattern for the server's command line
// (which must not match itself), method the method of the JSON-RPC line B
// injects, sleepA the host pid of A's "sleep 1041" and spillA A's spill
// file.
func (s *attackSetup) rows(t *testing.T, server int, serverLine, method string, sleepA int, spillA string) []attackRow {
	t.Helper()
	// The row would pass whatever a command saw if the pattern missed
	// the server's own line (as perProcess prints it).
	if line := testutil.Cmdline(server) + " "; !regexp.MustCompile(serverLine).MatchString(line) {
		t.Fatalf("%q does not find the server's command line %q", serverLine, line)
	}
	pid := strconv.Itoa(server)
	s.writable = s.writableRoots()
	bashrc := filepath.Join(s.home, ".bashrc")
	outside := filepath.Join(s.home, "outside")
	written := func(path string) string {
		return "[sandbox: write to " + path + " denied under workspace-write mode; writable: " + s.writable + "]"
	}
	// perProcess prints the command line of each process the command
	// sees, one a line (the other rows of B run beside it).
	const perProcess = `for p in /proc/[0-9]*; do { tr '\0' ' ' <$p/cmdline && echo; } 2>/dev/null; done | `
	const commit = "git -c user.name=b -c user.email=b@example.com commit"
	protected := func(path string) string { return "[sandbox: " + path + " is read-only (protected)]" }
	pwned := s.pwned()
	return []attackRow{
		{name: "server environ", command: "cat /proc/" + pid + "/environ",
			want: "[stderr]\ncat: /proc/" + pid + "/environ: No such file or directory\n[exit code: 1]"},
		{name: "server mem", command: "cat /proc/" + pid + "/mem",
			want: "[stderr]\ncat: /proc/" + pid + "/mem: No such file or directory\n[exit code: 1]"},
		{name: "server stdout", command: `printf '{"jsonrpc":"2.0","method":"` + method + `","params":{"level":"error","data":"%s-%s"}}\n' injected 7d21e0 >/proc/` + pid + "/fd/1",
			want: "[stderr]\nbash: line 1: /proc/" + pid + "/fd/1: No such file or directory\n[exit code: 1]"},
		{name: "server not in /proc", command: perProcess + "grep -c '" + serverLine + "'",
			want: "0\n[exit code: 1]"},
		{name: "A's processes", command: perProcess + `grep -cx 'sleep 1041 '`,
			want: "0\n[exit code: 1]"},
		{name: "kill A's sleep by host pid", command: "kill -9 " + strconv.Itoa(sleepA),
			want: "[stderr]\nbash: line 1: kill: (" + strconv.Itoa(sleepA) + ") - No such process\n[exit code: 1]"},
		{name: "kill A's sleep by /proc", command: `for p in /proc/[0-9]*; do { tr '\0' ' ' <$p/cmdline; } 2>/dev/null | grep -q '^sleep 1041' && kill -9 ${p#/proc/} && echo killed; done; echo scanned`,
			want: "scanned\n"},
		{name: "A's spill file", command: "head -1 " + spillA,
			want: "[stderr]\nhead: cannot open '" + spillA + "' for reading: No such file or directory\n[exit code: 1]"},
		{name: "bashrc", command: "echo evil >> ~/.bashrc",
			want:  "[stderr]\nbash: line 1: " + bashrc + ": Permission denied\n" + written(bashrc) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, bashrc, "# bashrc\n") }},
		{name: "conch config", command: "echo 'timeout_ms = 1' >> " + s.config,
			// conch's configuration directory is hidden (CONTRACT 16.1):
			// the operating system's error, no marker.
			want:  "[stderr]\nbash: line 1: " + s.config + ": Permission denied\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, s.config, "# conch\ntimeout_ms = 120000\n") }},
		// Boundary (issue 19): nothing shared with the host that a
		// command can use against it.
		{name: "conch's files", command: "cat " + filepath.Join(s.runtime, "conch", "token") + "; find " + filepath.Join(s.state, "conch") + " " + filepath.Dir(s.config) + " -mindepth 1 | wc -l",
			want: "0\n[stderr]\ncat: " + filepath.Join(s.runtime, "conch", "token") + ": No such file or directory\n"},
		{name: "project file", command: "echo '[sandbox]' >> .conch/config.toml",
			want:  "[stderr]\nbash: line 1: .conch/config.toml: Read-only file system\n" + protected(filepath.Join(s.wsB, ".conch", "config.toml")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".conch", "config.toml"), "# project\n") }},
		{name: "setuid", command: "touch suid && chmod 4755 suid",
			want: "[stderr]\nchmod: changing permissions of 'suid': Operation not permitted\n[exit code: 1]"},
		{name: "/dev/shm", command: "echo x > /dev/shm/" + s.marker + " && df -B1 --output=size /dev/shm | tail -1 | tr -d ' '",
			want:  "67108864\n",
			after: func(t *testing.T) { unchanged(t, "/dev/shm/"+s.marker, "") }},
		{name: "cgroups", command: `awk '$3 ~ /^cgroup/ { split($4, o, ","); print o[1] }' /proc/self/mounts | sort -u`, want: "ro\n"},
		{name: "git hook", command: "echo evil > .git/hooks/pre-commit",
			want:  "[stderr]\nbash: line 1: .git/hooks/pre-commit: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/hooks/pre-commit")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".git/hooks/pre-commit"), "") }},
		{name: "git config", command: "echo '[core] hooksPath = /tmp' >> .git/config",
			want: "[stderr]\nbash: line 1: .git/config: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/config")) + "\n[exit code: 1]"},
		{name: "symlink out", command: "ln -sf " + outside + " out && echo evil > out",
			want:  "[stderr]\nbash: line 1: out: Permission denied\n" + written(outside) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, outside, "") }},
		// Denials are named from the sandbox's record, whatever the
		// command's shape or what it printed (CONTRACT 17.2).
		{name: "exit 0", command: "touch ~/x; echo done",
			want: "done\n[stderr]\ntouch: cannot touch '" + filepath.Join(s.home, "x") + "': Permission denied\n" + written(filepath.Join(s.home, "x"))},
		{name: "stderr merged and piped", command: "touch ~/y 2>&1 | tail -1",
			want: "touch: cannot touch '" + filepath.Join(s.home, "y") + "': Permission denied\n" + written(filepath.Join(s.home, "y"))},
		{name: "after cd", command: "cd ../sib && touch built",
			want: "[stderr]\ntouch: cannot touch 'built': Permission denied\n" + written(filepath.Join(filepath.Dir(s.home), "sib", "built")) + "\n[exit code: 1]"},
		{name: "a rename out of the home", command: "mv ~/.bashrc b",
			want:  "[stderr]\nmv: cannot move '" + bashrc + "' to 'b': Permission denied\n" + written(bashrc) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, bashrc, "# bashrc\n") }},
		{name: "printed, not denied", command: `echo "touch: cannot touch '/etc/passwd': Permission denied" >&2; exit 1`,
			want: "[stderr]\ntouch: cannot touch '/etc/passwd': Permission denied\n[exit code: 1]"},
		{name: "unix socket outside", command: `perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => "` + s.sock + `") or die "refused: $!\n"'`,
			want: "[stderr]\nrefused: Permission denied\n[sandbox: connect to unix socket " + s.sock + " denied under workspace-write mode]\n[exit code: 13]"},
		// Nothing a command writes makes git run code later (CONTRACT
		// 16.2): the user's git afterwards runs nothing (s.userGit).
		{name: "git commondir", command: "echo /tmp > .git/commondir",
			want:  "[stderr]\nbash: line 1: .git/commondir: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/commondir")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".git/commondir"), "") }},
		{name: "git config.worktree", command: "printf '[core]\\n\\tfsmonitor = touch " + pwned + "\\n' > .git/config.worktree",
			want:  "[stderr]\nbash: line 1: .git/config.worktree: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/config.worktree")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".git/config.worktree"), "") }},
		{name: "git info/attributes", command: "echo '* filter=evil' > .git/info/attributes",
			want:  "[stderr]\nbash: line 1: .git/info/attributes: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/info/attributes")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".git/info/attributes"), "") }},
		{name: "git alternates", command: "echo /tmp > .git/objects/info/alternates",
			want:  "[stderr]\nbash: line 1: .git/objects/info/alternates: Read-only file system\n" + protected(filepath.Join(s.wsB, ".git/objects/info/alternates")) + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, filepath.Join(s.wsB, ".git/objects/info/alternates"), "") }},
		{name: "git hook deeper than the search", command: "echo evil > " + s.deep + "/.git/hooks/pre-commit",
			want:  "[stderr]\nbash: line 1: " + s.deep + "/.git/hooks/pre-commit: Read-only file system\n" + protected(s.deep+"/.git/hooks/pre-commit") + "\n[exit code: 1]",
			after: func(t *testing.T) { unchanged(t, s.deep+"/.git/hooks/pre-commit", "") }},
		{name: "git config in node_modules", command: "echo '[core] fsmonitor = touch " + pwned + "' >> " + s.nodeModules + "/.git/config",
			want: "[stderr]\nbash: line 1: " + s.nodeModules + "/.git/config: Read-only file system\n" + protected(s.nodeModules+"/.git/config") + "\n[exit code: 1]"},
		{name: "a nested repository as a gitlink", command: "cd outer && git init -q sub && cd sub && git config core.fsmonitor 'touch " + pwned + "'; " +
			"echo x > f && git add f && " + commit + " -qm s && cd .. && git -c advice.addEmbeddedRepo=false add sub && " + commit + " -qm sub && git log --format=%s",
			want: "sub\n[stderr]\nerror: could not write config file .git/config: Read-only file system\nwarning: adding embedded git repository: sub\n" + protected(filepath.Join(s.outer, "sub/.git/config"))},
		// What must keep working.
		// Known limit: git init in a repository that exists rewrites its
		// .git/config, which is protected; a new repository works.
		{name: "git init again", command: "git init -q .",
			want: "[stderr]\nerror: could not write config file " + filepath.Join(s.wsB, ".git/config") + ": Device or resource busy\n" +
				"fatal: could not set 'core.repositoryformatversion' to '0'\n" + protected(filepath.Join(s.wsB, ".git/config")) + "\n[exit code: 128]"},
		{name: "git init and commit", command: "git init -q repo && cd repo && echo x > f && git add f && " + commit + " -qm b && git log --format=%s",
			want: "b\n"},
		{name: "git add and commit", command: "echo y > g && git add g && " + commit + " -qm c && git log --format=%s",
			want: "c\n"},
		{name: "tmp", command: "echo x > /tmp/conch-attack-$$ && cat /tmp/conch-attack-$$ && rm /tmp/conch-attack-$$",
			want: "x\n"},
		{name: "tty", command: "test -t 0 && echo tty", tty: true, want: "tty\n"},
		{name: "python's multiprocessing Manager (the session's own unix sockets)",
			command: `python3 -c 'from multiprocessing import Manager; m = Manager(); d = m.dict(); d["a"] = 1; print(d["a"])'`, want: "1\n"},
	}
}

// pwned is the file a planted git hook or fsmonitor leaves when it runs.
func (s *attackSetup) pwned() string { return filepath.Join(s.home, "PWNED") }

// userGit runs git status and git commit as the user would afterwards,
// outside conch, in B's repositories, and fails t if a planted program
// ran.
func (s *attackSetup) userGit(t *testing.T) {
	t.Helper()
	for _, dir := range []string{s.wsB, s.outer, filepath.Join(s.outer, "sub"), s.deep, s.nodeModules} {
		for _, args := range [][]string{{"status"}, {"-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "u"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = []string{"HOME=" + s.home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1"}
			if s.nobody {
				testutil.Unprivileged(t, cmd)
			}
			out, err := cmd.CombinedOutput()
			if _, perr := os.Lstat(s.pwned()); perr == nil {
				t.Errorf("the user's git %s in %s ran a planted program (%v):\n%s", strings.Join(args, " "), dir, err, out)
				os.Remove(s.pwned())
			}
		}
	}
}

// taskID is the id of the task a start message names.
func taskID(t *testing.T, started string) string {
	t.Helper()
	id, ok := strings.CutPrefix(started, "started background task ")
	if !ok {
		t.Fatalf("not a task's start: %q", started)
	}
	return id
}

// TestAttackACP is TestAttack through `conch acp` on the defaults: two
// sessions of the scripted ACP client, B's rows run one after the other
// (the prompts of one session wait their turn; ACP has no tty), and the
// end of the connection ends what B left running. As root and as uid
// 65534.
func TestAttackACP(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			testAttackACP(t, nobody)
		})
	}
}

// terminalRows are the terminals a command sees: its init's own, none of
// the host's (its terminal's name, /dev/pts/0 on a host with one, is
// unknown there), and a new one is the first of its instance. They are
// asked of a session that opens no other terminal meanwhile.
func (s *attackSetup) terminalRows() []struct{ command, want string } {
	return []struct{ command, want string }{
		{"ls /dev/pts", "ptmx\n"},
		{"exec 3<" + s.pty, "[stderr]\nbash: line 1: " + s.pty + ": No such file or directory\n[exit code: 1]"},
		{`/usr/bin/python3 -c 'import pty, os; m, s = pty.openpty(); print(os.ttyname(s))'`, "/dev/pts/0\n"},
	}
}

// exitLine is the exit marker, which an ACP card leaves to its status.
var exitLine = regexp.MustCompile(`\n?\[exit code: \d+\]$`)

func testAttackACP(t *testing.T, nobody bool) {
	s := newAttackSetup(t, nobody)
	cmd := testutil.Conch(t, s.marker, "acp")
	cmd.Env = append(cmd.Env, s.env()...)
	if nobody {
		testutil.Unprivileged(t, cmd)
	}
	stdin, stdout, stream := startRecorded(t, cmd, s.marker, nobody)
	acp := newACPScript(t, stdin, stdout)
	a := acp.session(s.wsA)
	b := acp.newSession(s.wsB)
	if a == "" || b == "" {
		t.Fatalf("sessions %q and %q:\n%s", a, b, stream.String())
	}
	if got := acp.card(a, "&sleep 1041"); got != "started background task bash-1" {
		t.Fatalf("A's background sleep: %q", got)
	}
	sleepA := s.hostPid(t, "sleep 1041")
	m := spillPath.FindStringSubmatch(acp.card(a, "seq 1 400000"))
	if m == nil {
		t.Fatal("A's long output names no spill file")
	}
	// B's prompts run one after the other and ACP has no tty: B can be
	// asked about terminals too.
	rows := s.rows(t, cmd.Process.Pid, "/conch [a]cp $", "session/update", sleepA, m[1])
	for _, c := range s.terminalRows() {
		rows = append(rows, attackRow{name: "terminals", command: c.command, want: c.want})
	}
	for _, c := range rows {
		if c.tty {
			continue
		}
		want := strings.TrimSuffix(exitLine.ReplaceAllString(c.want, ""), "\n")
		if strings.Contains(want, "[sandbox: ") {
			// The script rejects the question a denial brings, and the
			// card says so (docs/sandbox.md#escalation).
			want += "\n[the user declined to run it outside the sandbox]"
		}
		if got := acp.card(b, c.command); got != want {
			t.Errorf("%s: %s:\n got %q\nwant %q", c.name, c.command, got, want)
		}
		if c.after != nil {
			c.after(t)
		}
	}
	if !s.alive("sleep 1041") {
		t.Error("A's sleep was killed")
	}
	s.userGit(t)
	if strings.Contains(stream.String(), "injected-7d21e0") {
		t.Errorf("a command wrote into the ACP stream:\n%s", stream.String())
	}

	m = spillPath.FindStringSubmatch(acp.card(b, "seq 1 400000"))
	if m == nil {
		t.Fatal("B's long output names no spill file")
	}
	if got := acp.card(b, "head -1 "+m[1]); got != "1" {
		t.Errorf("B reading its own spill file: %q", got)
	}
	loop, beat := s.forkLoop(t)
	id := taskID(t, acp.card(b, "&"+loop))
	testutil.WaitBeating(t, beat)
	if got, want := acp.card(b, "/kill "+id), "killed task "+id+" [status: killed, exit code: 0]"; got != want {
		t.Errorf("/kill of the fork loop: %q, want %q", got, want)
	}
	if testutil.Beating(t, beat) {
		t.Error("the fork loop runs after /kill")
	}
	// The end of the connection (startRecorded's cleanup) must end it.
	if got := acp.card(b, "setsid nohup sleep 1043 >/dev/null 2>&1 &"); got != "(no output)" {
		t.Errorf("the escapee: %q", got)
	}
	s.hostPid(t, "sleep 1043")
}

// unchanged checks that path holds want ("" for a file that must not
// exist).
func unchanged(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if want == "" {
		if err == nil {
			t.Errorf("%s was written: %q", path, b)
		}
		return
	}
	if err != nil || string(b) != want {
		t.Errorf("%s: %q, %v; want it unchanged", path, b, err)
	}
}
