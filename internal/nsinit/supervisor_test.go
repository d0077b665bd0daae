//go:build linux

package nsinit_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
	"github.com/conch-dev/conch/internal/testutil"
)

// runHelper runs this test binary as the helper named (see TestMain)
// inside in, in h's workspace, with env added, and returns its status
// and output.
func (h *sandboxHost) runHelper(t *testing.T, in *nsinit.Init, plan *sandbox.Plan, helper string, env ...string) (code int, stdout, stderr string, markers []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	so, ow := capture(t)
	se, ew := capture(t)
	ch, err := in.Spawn(nsinit.Command{Path: exe, Args: []string{exe}, Env: append(slices.Clone(h.env), append(env, helperEnv+"="+helper, noRaceSleep)...), Dir: h.ws, Stdout: ow, Stderr: ew})
	ow.Close()
	ew.Close()
	if err != nil {
		t.Fatalf("Spawn %s: %v", helper, err)
	}
	ws := waitLong(t, ch)
	stdout, stderr = so.text(t), se.text(t)
	denied, more := ch.Denials()
	ch.Release()
	return ws.ExitStatus(), stdout, stderr, sandbox.Markers(plan, denied, more)
}

// waitLong is wait for the sandbox tests' scripts, which run many
// programs (git, python) and may take long on a loaded machine under
// the race detector: it fails t after two minutes, not ten seconds.
func waitLong(t *testing.T, ch *nsinit.Child) syscall.WaitStatus {
	t.Helper()
	select {
	case <-ch.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatal("command did not exit within 2 minutes")
	}
	ws, err := ch.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return ws
}

// TestSupervisorRecord: the markers come from what the sandbox denied,
// recorded by the init's supervisor, whatever the command's shape: also
// when it exits 0, pipes or merges its stderr, changes directory, or
// leaves the write to a child; text a command prints makes none.
func TestSupervisorRecord(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	if err := os.Mkdir(filepath.Join(h.home, "sib"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	writable := strings.Join(plan.Writable, ", ")
	outside := func(path string) string {
		return "[sandbox: write to " + path + " denied under workspace-write mode; writable: " + writable + "]"
	}
	home := func(name string) string { return outside(filepath.Join(h.home, name)) }
	cases := []struct {
		name, script string
		code         int
		markers      []string
	}{
		{"exits 0", `touch ~/x; echo done`, 0, []string{home("x")}},
		{"stderr merged and piped", `touch ~/y 2>&1 | tail -1`, 0, []string{home("y")}},
		{"after cd", `cd ../sib && touch built`, 1, []string{home("sib/built")}},
		{"a child writes", `sh -c 'mkdir -p ~/.npm/_cacache' || true`, 0, []string{home(".npm")}},
		{"a background child", `(touch ~/late) & wait`, 0, []string{home("late")}},
		{"a rename out of the home", `mv ~/.bashrc ./b`, 1, []string{home(".bashrc")}},
		// Not recorded: nothing outside is written, and programs copy
		// instead (a git clone of a repository outside does).
		{"a hard link to a file outside", `ln ~/.bashrc ./b`, 1, nil},
		{"a rename out", `echo x > f && mv f ~/f`, 1, []string{home("f")}},
		{"printed, not denied", `echo "touch: cannot touch '/etc/passwd': Permission denied" >&2; exit 1`, 1, nil},
		{"seven denials", `for i in 1 2 3 4 5 6 7; do touch ~/f$i 2>/dev/null; done; true`, 0, []string{
			home("f1"), home("f2"), home("f3"), home("f4"), home("f5"), "[sandbox: 2 more denied operations not shown]"}},
		{"a protected hook", `echo evil > .git/hooks/pre-commit`, 1, []string{"[sandbox: " + h.ws + "/.git/hooks/pre-commit is read-only (protected)]"}},
		{"a read of a hidden path", `cat ~/secret/key`, 1, []string{"[sandbox: file access denied under workspace-write mode]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr, markers := h.runMarked(t, in, plan, c.script)
			if code != c.code || !slices.Equal(markers, c.markers) {
				t.Errorf("%s: status %d, markers %q; want %d, %q (stderr %q)", c.script, code, markers, c.code, c.markers, stderr)
			}
		})
	}
	for _, f := range []string{"x", "y", "sib/built", ".npm", "late", "f"} {
		if _, err := os.Lstat(filepath.Join(h.home, f)); err == nil {
			t.Errorf("~/%s was written", f)
		}
	}
}

// TestSupervisorWorks: what commands do all day goes through the
// supervisor unchanged: files, directories, renames, links, modes, the
// umask, FIFOs, temporary files, /dev/stdout, and a command that made
// itself non-dumpable (ssh-agent does), /dev/null and /dev/tty (which
// the supervisor opens without resolving: no terminal here).
func TestSupervisorWorks(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	p.DenyRead = nil // the defaults: reads are not the supervisor's
	in, plan := startSandboxed(t, &p)
	script := `set -e
umask 027
echo a > f && echo b >> f && cat f
mkdir -p d/e && mv f d/e/g && ln d/e/g d/h && ln -s e/g d/s && cat d/s
chmod 640 d/h && stat -c '%a %h' d/e/g
touch -d 2001-01-01 d/h && truncate -s 1 d/h && wc -c < d/e/g
mkfifo p && { cat p & } && echo through > p && wait
python3 -c 'import tempfile,os; f=tempfile.TemporaryFile(dir="."); f.write(b"t"); print("tmp")'
python3 -c 'open("/dev/stdout","w").write("stdout\n"); open("/dev/stderr","w").write("stderr\n")'
python3 -c 'import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); open("nd", "w").write("x"); print("non-dumpable")'
python3 -c 'import os; fd = os.memfd_create("m"); open("/proc/self/fd/%d" % fd, "w").write("m"); print(os.pread(fd, 1, 0).decode())'
echo null > /dev/null && exec 3<>/dev/null && echo null >&3 && exec 3>&-
python3 -c 'import os
try: os.open("/dev/null", os.O_WRONLY|os.O_CREAT|os.O_EXCL)
except FileExistsError: print("null exists")'
{ : > /dev/tty; } 2>/dev/null || echo no terminal
tty='import errno, os
try: os.open("/dev/tty", os.O_RDWR|os.O_NONBLOCK); print("a terminal")
except OSError as e: print(errno.errorcode[e.errno])'
python3 -c "$tty" && setsid -w python3 -c "$tty"
mkdir m && stat -c '%a' m
rm -r d p nd
rmdir m && echo done`
	code, stdout, stderr, markers := h.runMarked(t, in, plan, script)
	want := "a\nb\na\nb\n640 2\n1\nthrough\ntmp\nstdout\nnon-dumpable\nm\nnull exists\nno terminal\nENXIO\nENXIO\n750\ndone\n"
	if code != 0 || stdout != want || stderr != "stderr\n" || markers != nil {
		t.Errorf("status %d, markers %q\nstdout %q\nwant   %q\nstderr %q", code, markers, stdout, want, stderr)
	}
}

// pwnedScript is a hook or fsmonitor command that leaves a file behind
// when git runs it.
func pwned(h *sandboxHost) string { return filepath.Join(h.home, "PWNED") }

// gitOutside runs git as the user would, outside conch, in dir, and
// fails t if a planted program ran.
func gitOutside(t *testing.T, h *sandboxHost, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(slices.Clone(h.env), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, _ := cmd.CombinedOutput()
	if _, err := os.Lstat(pwned(h)); err == nil {
		t.Errorf("git %s in %s ran a planted program:\n%s", strings.Join(args, " "), dir, out)
		os.Remove(pwned(h))
	}
}

// TestSupervisorGit: nothing a command writes makes git run code when
// the user runs git afterwards (CONTRACT 16.2): the files git reads as
// configuration, redirects or code cannot be planted in an existing git
// directory, even where they do not exist yet and at any depth; a
// repository born during the session is checked at its birth; the
// user's git status and commit outside conch then run nothing.
func TestSupervisorGit(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	// Repositories the bounded search of Resolve does not reach.
	deep := filepath.Join(h.ws, "a", "b", "c", "d", "e", "f", "g", "h", "deep")
	nm := filepath.Join(h.ws, "node_modules", "pkg")
	for _, dir := range []string{deep, nm} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		git := exec.Command("git", "init", "-q")
		git.Dir = dir
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git init %s: %v\n%s", dir, err, out)
		}
	}
	evil := "/tmp/conch-evil-" + marker
	t.Cleanup(func() { os.RemoveAll(evil) })
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	protected := func(path string) string { return "[sandbox: " + path + " is read-only (protected)]" }
	fsmonitor := `printf '[core]\n\tfsmonitor = "touch ` + pwned(h) + `"\n'`
	hook := `printf '#!/bin/sh\ntouch ` + pwned(h) + `\n'`
	planted := []struct {
		name, script string
		path         string // what must not be written
	}{
		{"commondir", `mkdir -p ` + evil + ` && ` + fsmonitor + ` > ` + evil + `/config && mkdir ` + evil + `/objects ` + evil + `/refs && echo ` + evil + ` > .git/commondir`, ".git/commondir"},
		{"config.worktree", fsmonitor + ` > .git/config.worktree`, ".git/config.worktree"},
		{"info/attributes", `printf '* filter=evil\n' > .git/info/attributes`, ".git/info/attributes"},
		{"alternates", `echo ` + evil + `/objects > .git/objects/info/alternates`, ".git/objects/info/alternates"},
		{"a hook renamed in", hook + ` > h && chmod +x h && mv h .git/hooks/post-checkout`, ".git/hooks/post-checkout"},
		{"a deep repository's hook", hook + ` > ` + deep + `/.git/hooks/pre-commit`, deep + "/.git/hooks/pre-commit"},
		{"a deep repository's config", fsmonitor + ` >> ` + deep + `/.git/config`, deep + "/.git/config"},
		{"node_modules' hook", hook + ` > ` + nm + `/.git/hooks/pre-commit`, nm + "/.git/hooks/pre-commit"},
		{"node_modules' commondir", `echo ` + evil + ` > ` + nm + `/.git/commondir`, nm + "/.git/commondir"},
	}
	for _, c := range planted {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(h.ws, path)
			}
			before, _ := os.ReadFile(path)
			code, _, stderr, markers := h.runMarked(t, in, plan, c.script)
			if code == 0 || !slices.Contains(markers, protected(path)) {
				t.Errorf("%s: status %d, markers %q, want the protected marker for %s (stderr %q)", c.script, code, markers, path, stderr)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("%s changed: %q", path, after)
			}
		})
	}

	// A repository made in the session, configured to run a program,
	// then added to the outer one as a gitlink: the user's git status
	// in the outer repository looks into it.
	code, _, stderr, markers := h.runMarked(t, in, plan, `git init -q sub && cd sub && echo x > f && git add f && git commit -qm s &&
git config core.fsmonitor "touch `+pwned(h)+`"; `+fsmonitor+` >> .git/config; cd .. && git add sub && git commit -qm sub`)
	config := filepath.Join(h.ws, "sub", ".git", "config")
	if code != 0 || !slices.Equal(markers, []string{protected(config)}) {
		t.Errorf("nested repository: status %d, markers %q (stderr %q)", code, markers, stderr)
	}
	// A git directory laid out by hand, its configuration written
	// before it looked like one, and a working tree pointing at it.
	code, _, stderr, markers = h.runMarked(t, in, plan, `mkdir -p gd/hooks w && `+fsmonitor+` > gd/config &&
`+hook+` > gd/hooks/pre-commit && chmod +x gd/hooks/pre-commit && mkdir -p gd/objects gd/refs/heads && echo 'ref: refs/heads/main' > gd/HEAD &&
echo "gitdir: $PWD/gd" > w/.git`)
	gd := filepath.Join(h.ws, "gd")
	if code != 0 || !slices.Equal(markers, []string{protected(gd + "/config"), protected(gd + "/hooks/pre-commit")}) {
		t.Errorf("a git directory by hand: status %d, markers %q (stderr %q)", code, markers, stderr)
	}
	if fi, err := os.Stat(gd + "/hooks/pre-commit"); err != nil || fi.Mode()&0o111 != 0 {
		t.Errorf("the hand-made git directory's hook: %v; want it without execute bits", fi)
	}
	if b, _ := os.ReadFile(gd + "/config"); strings.Contains(string(b), "fsmonitor") {
		t.Errorf("the hand-made git directory's config: %q", b)
	}

	// A repository with its git directory apart (a gitfile points to
	// it), and a bare one a user might later cd into.
	code, _, stderr, markers = h.runMarked(t, in, plan, `git init -q --separate-git-dir=$PWD/sep w2 && git init -q --bare b.git &&
git -C w2 config core.fsmonitor "touch `+pwned(h)+`"; git -C b.git config core.fsmonitor "touch `+pwned(h)+`"; git -C b.git config core.pager "touch `+pwned(h)+`"`)
	sep, bare := filepath.Join(h.ws, "sep", "config"), filepath.Join(h.ws, "b.git", "config")
	if code == 0 || !slices.Equal(markers, []string{protected(sep), protected(bare)}) {
		t.Errorf("separate and bare repositories: status %d, markers %q (stderr %q)", code, markers, stderr)
	}

	// The user, outside conch, afterwards.
	gitOutside(t, h, h.ws, "status")
	gitOutside(t, h, h.ws, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "user")
	gitOutside(t, h, filepath.Join(h.ws, "sub"), "status")
	gitOutside(t, h, filepath.Join(h.ws, "w"), "status")
	gitOutside(t, h, filepath.Join(h.ws, "w"), "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "user")
	gitOutside(t, h, deep, "status")
	gitOutside(t, h, nm, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "user")
	gitOutside(t, h, filepath.Join(h.ws, "w2"), "status")
	for _, f := range []string{sep, bare} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "fsmonitor") || strings.Contains(string(b), "pager") {
			t.Errorf("%s: %q", f, b)
		}
	}
}

// TestSupervisorGitWorkflows: what a developer does with git in the
// workspace keeps working under the git guard.
func TestSupervisorGitWorkflows(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	src := filepath.Join(h.ws, "src")
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	// set -x: the trace (on stderr, shown on failure) says which step
	// failed.
	script := `set -ex
git init -q ` + src + ` && git -C ` + src + ` commit -q --allow-empty -m src
echo a > a && git add a && git commit -qm a
git branch b1 && git checkout -q b1 && echo b > b && git add b && git commit -qm b && git checkout -q -
echo c >> a && git stash -q && git stash pop -q && git checkout -q a
git rebase -q b1
git worktree add -q wt b1 && git -C wt log --format=%s -1
git clone -q ` + src + ` clone && git -C clone log --format=%s
git clone -q --bare ` + src + ` bare.git && git -C bare.git log --format=%s
git -c protocol.file.allow=always submodule add -q ` + src + ` sm 2>/dev/null; git -C sm log --format=%s
git -C clone remote add other ` + src + ` && git -C clone config branch.main.description d && git -C clone config user.name n
git log --format=%s`
	code, stdout, stderr, markers := h.runMarked(t, in, plan, script)
	want := "b\nsrc\nsrc\nsrc\nb\na\nfirst\n"
	if code != 0 || stdout != want {
		t.Errorf("status %d, markers %q\nstdout %q\nwant   %q\nstderr %q\nthe repository's refs now:\n%s", code, markers, stdout, want, stderr, gitRefs(filepath.Join(h.ws, ".git")))
	}
}

// gitRefs describes what git reads to resolve HEAD in the git directory
// dir, as it is on disk: HEAD and every loose ref, with their mode, size
// and content.
func gitRefs(dir string) string {
	var b strings.Builder
	describe := func(path string) {
		rel, _ := filepath.Rel(dir, path)
		fi, err := os.Lstat(path)
		if err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", rel, err)
			return
		}
		data, err := os.ReadFile(path)
		fmt.Fprintf(&b, "  %s: %v %d bytes %q %v\n", rel, fi.Mode(), fi.Size(), data, err)
	}
	describe(filepath.Join(dir, "HEAD"))
	describe(filepath.Join(dir, "packed-refs"))
	filepath.WalkDir(filepath.Join(dir, "refs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			describe(path)
		}
		return nil
	})
	return b.String()
}

// TestSupervisorTOCTOU: a thread flipping the path in memory while
// another opens it cannot make the supervisor create a protected name:
// the supervisor opens what it checked, and never lets the kernel read
// the path again.
func TestSupervisorTOCTOU(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, plan := startSandboxed(t, &p)
	code, stdout, stderr, _ := h.runHelper(t, in, plan, "race-open", "RACE_A=race-ok-file", "RACE_B=.git/commondir")
	if code != 0 {
		t.Fatalf("racer: status %d: %s%s", code, stdout, stderr)
	}
	var created, refused, other int
	fmt.Sscanf(stdout, "created %d refused %d other %d", &created, &refused, &other)
	if _, err := os.Lstat(filepath.Join(h.ws, ".git", "commondir")); err == nil {
		t.Errorf("the race created .git/commondir (%s)", stdout)
	}
	if created == 0 || refused == 0 {
		t.Errorf("the racer never raced: %s", stdout)
	}
}

// TestSupervisorUnixSockets: a command's own sockets work (a path, an
// abstract name; Python's multiprocessing Manager and forkserver), a
// socket outside is refused with its marker unless the plan lists it,
// and changing the address in memory during the connect reaches no
// other socket.
func TestSupervisorUnixSockets(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	// Each listener counts its own connections: one a subtest made may be
	// accepted only during the next (a loaded machine is slow to run the
	// accepting goroutine).
	accepted := map[string]*atomic.Int32{}
	listen := func(name string) string {
		n := new(atomic.Int32)
		accepted[name] = n
		l, err := net.Listen("unix", name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if name[0] != '@' {
			os.Chmod(name, 0o777)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				n.Add(1) // not through the map, which the test writes meanwhile
				c.Close()
			}
		}()
		return name
	}
	outside := listen(filepath.Join(h.home, "outside.sock"))
	inTmp := listen("/tmp/conch-sock-" + marker)
	listed := listen(filepath.Join(h.home, "listed.sock"))
	abstract := listen("@conch-test-" + marker)
	p := h.policy(sandbox.NetworkOn)
	p.UnixSockets = []string{listed}
	in, plan := startSandboxed(t, &p)
	refused := func(path string) []string {
		return []string{"[sandbox: connect to unix socket " + path + " denied under workspace-write mode]"}
	}
	for _, c := range []struct {
		name, helper, sock string
		stdout             string
		markers            []string
	}{
		{"its own socket", "selfsock", filepath.Join(h.ws, "own.sock"), "ok\n", nil},
		{"its own socket in /tmp", "selfsock", "/tmp/conch-own-" + marker, "ok\n", nil},
		{"its own abstract socket", "selfsock", "@conch-own-" + marker, "ok\n", nil},
		{"a socket outside", "dial", outside, "", refused(outside)},
		{"another's socket in /tmp", "dial", inTmp, "", refused(inTmp)},
		{"an abstract socket of the host", "dial", abstract, "", refused(abstract)},
		{"a listed socket", "dial", listed, "connected\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before int32
			if n := accepted[c.sock]; n != nil {
				before = n.Load()
			}
			_, stdout, stderr, markers := h.runHelper(t, in, plan, c.helper, "SOCK_NAME="+c.sock)
			if c.stdout != "" && stdout != c.stdout || !slices.Equal(markers, c.markers) {
				t.Errorf("stdout %q, markers %q; want %q, %q (stderr %q)", stdout, markers, c.stdout, c.markers, stderr)
			}
			if c.markers != nil && (accepted[c.sock].Load() != before || !strings.Contains(stdout, "permission denied")) {
				t.Errorf("the refused socket was reached: %q", stdout)
			}
		})
	}
	os.Remove("/tmp/conch-own-" + marker)

	// The address flips between the command's own socket and one
	// outside while it connects.
	before := accepted[outside].Load()
	code, stdout, stderr, _ := h.runHelper(t, in, plan, "race-connect", "RACE_A="+filepath.Join(h.ws, "race.sock"), "RACE_B="+outside)
	if code != 0 {
		t.Fatalf("racer: status %d: %s%s", code, stdout, stderr)
	}
	var connected, refusedN, other int
	fmt.Sscanf(stdout, "connected %d refused %d other %d", &connected, &refusedN, &other)
	if n := accepted[outside].Load() - before; n != 0 {
		t.Errorf("the race reached the socket outside %d times (%s)", n, stdout)
	}
	if connected == 0 || refusedN == 0 {
		t.Errorf("the racer never raced: %s", stdout)
	}

	// The descriptor flips between an internet socket and a unix one
	// while it connects to the socket outside.
	before = accepted[outside].Load()
	code, stdout, stderr, _ = h.runHelper(t, in, plan, "race-fdswap", "RACE_B="+outside)
	if code != 0 {
		t.Fatalf("descriptor racer: status %d: %s%s", code, stdout, stderr)
	}
	connected, refusedN, other = 0, 0, 0
	fmt.Sscanf(stdout, "connected %d refused %d other %d", &connected, &refusedN, &other)
	if n := accepted[outside].Load() - before; n != 0 || connected != 0 {
		t.Errorf("swapping the descriptor reached the socket outside %d times (%s)", n, stdout)
	}
	if refusedN == 0 || other == 0 {
		t.Errorf("the descriptor racer never raced: %s", stdout)
	}
	// The same swap, binding: a unix socket at a protected name of the
	// workspace's git directory (git reads commondir).
	commondir := filepath.Join(h.ws, ".git", "commondir")
	code, stdout, stderr, _ = h.runHelper(t, in, plan, "race-fdswap", "RACE_OP=bind", "RACE_B="+commondir)
	if code != 0 {
		t.Fatalf("descriptor racer (bind): status %d: %s%s", code, stdout, stderr)
	}
	connected, refusedN, other = 0, 0, 0
	fmt.Sscanf(stdout, "connected %d refused %d other %d", &connected, &refusedN, &other)
	if _, err := os.Lstat(commondir); err == nil || connected != 0 {
		t.Errorf("swapping the descriptor bound a socket at %s (%s)", commondir, stdout)
	}
	if refusedN+other == 0 {
		t.Errorf("the descriptor racer (bind) never raced: %s", stdout)
	}

	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for multiprocessing")
	}
	for _, py := range []string{
		`from multiprocessing import Manager
m = Manager(); d = m.dict(); d["a"] = 1; print(d["a"]); m.shutdown()`,
		`import multiprocessing as mp
mp.set_start_method("forkserver")
with mp.Pool(2) as p: print(p.map(abs, [-1, -2]))`,
	} {
		code, stdout, stderr, markers := h.runMarked(t, in, plan, "python3 -c '"+py+"'")
		if code != 0 || markers != nil || !(stdout == "1\n" || stdout == "[1, 2]\n") {
			t.Errorf("%s: status %d, stdout %q, markers %q, stderr %q", py, code, stdout, markers, stderr)
		}
	}
}

// noNotifyHelper hides seccomp user notification from itself and its
// children (a filter makes SECCOMP_GET_ACTION_AVAIL fail, as on a kernel
// without it), starts a sandboxed init for the workspace in
// SANDBOX_TEST_WS, and prints what it reports, what two writes did and
// the markers they got.
func noNotifyHelper() int {
	hide := seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | seccomp.Action(syscall.EOPNOTSUPP),
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "seccomp",
					Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.SECCOMP_GET_ACTION_AVAIL}},
				}},
			}},
		},
	}
	if err := seccomp.LoadFilter(hide); err != nil {
		fmt.Println("set-up:", err)
		return 1
	}
	ws := os.Getenv("SANDBOX_TEST_WS")
	plan, err := sandbox.Policy{Workspace: ws, TempDirs: []string{"/tmp"}}.Resolve()
	if err != nil {
		fmt.Println("resolve:", err)
		return 1
	}
	o := initOptions()
	o.Sandbox = plan
	in, err := nsinit.Start(o)
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	defer in.Close()
	fmt.Printf("unenforced: %q\n", in.Unenforced())
	for _, target := range []string{filepath.Join(filepath.Dir(ws), "outside"), filepath.Join(ws, ".git", "hooks", "pre-commit")} {
		ch, err := in.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", "echo x > " + target}, Dir: ws})
		if err != nil {
			fmt.Println("spawn:", err)
			return 1
		}
		ws, _ := ch.Wait()
		d, more := ch.Denials()
		ch.Release()
		fmt.Printf("write %s: %d %q\n", filepath.Base(target), ws.ExitStatus(), sandbox.Markers(plan, d, more))
	}
	return 0
}

// TestSupervisorUnavailable: on a kernel without seccomp user
// notification, the init says what it cannot enforce, and Landlock and
// the mounts still hold, without markers.
func TestSupervisorUnavailable(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(testutil.Env(marker), helperEnv+"=nonotify", "SANDBOX_TEST_WS="+h.ws, noRaceSleep)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	for _, want := range []string{
		`unenforced: ["` + sandbox.UnenforcedSupervisor + ` (seccomp user notification unavailable: operation not supported)"]`,
		"write outside: 1 []\n",
		"write pre-commit: 1 []\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("helper output lacks %q:\n%s", want, out)
		}
	}
}

// TestSupervisorWritesUnderSignals: every file a command writes through
// the supervisor holds what it wrote while signals rain on the init (a
// child's exit, the Go runtime's own). A signal that interrupted the
// supervisor handing a descriptor over together with the answer
// (SECCOMP_ADDFD_FLAG_SEND) left the command's open(2) returning 0: its
// writes went to its standard input and the file stayed empty (a venv's
// pip with empty modules beside two CPU burners).
func TestSupervisorWritesUnderSignals(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Every thread of the init, its supervisor's among them:
			// Go's runtime takes SIGURG and goes on, but a system call
			// it interrupts is restarted.
			tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", in.Pid()))
			for _, task := range tasks {
				if tid, err := strconv.Atoi(task.Name()); err == nil {
					unix.Tgkill(in.Pid(), tid, unix.SIGURG)
				}
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	const n = 300
	script := fmt.Sprintf(`for i in $(seq %d); do echo "line $i" > f$i; done
bad=0; for i in $(seq %d); do [ "$(cat f$i)" = "line $i" ] || bad=$((bad+1)); done; echo "bad $bad"`, n, n)
	code, stdout, stderr := h.runLong(t, in, script, 2*time.Minute)
	close(stop)
	<-done
	if code != 0 || stdout != "bad 0\n" || stderr != "" {
		t.Errorf("status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
