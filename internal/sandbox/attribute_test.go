package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tableHost is the machine of the golden cases: the server can write
// below the prefixes in writable, and links maps a symlink to its target.
type tableHost struct {
	writable []string
	links    map[string]string
}

func (h tableHost) CanWrite(p string) bool { return within(p, h.writable) }

func (h tableHost) Resolve(p string) string {
	for link, target := range h.links {
		if p == link || strings.HasPrefix(p, link+"/") {
			return filepath.Join(target, strings.TrimPrefix(p, link))
		}
	}
	return p
}

func TestAttribute(t *testing.T) {
	ws := &Plan{
		Mode:      WorkspaceWrite,
		Network:   NetworkOn,
		Writable:  []string{"/home/u/proj", "/tmp", "/home/u/.cache"},
		Protected: []string{"/home/u/proj/.git/hooks", "/home/u/proj/.git/config"},
		Pinned:    []string{"/home/u/proj/.git"},
	}
	off := *ws
	off.Network = NetworkOff
	ro := &Plan{Mode: ReadOnly, Network: NetworkOn, Writable: []string{"/tmp"}}
	full := &Plan{Mode: FullAccess, Network: NetworkOn}
	user := tableHost{writable: []string{"/home/u", "/tmp"}, links: map[string]string{"/home/u/proj/out": "/home/u/elsewhere"}}
	root := tableHost{writable: []string{"/"}}
	const writeHome = "[sandbox: write to /home/u/x denied under workspace-write mode; writable: /home/u/proj, /tmp, /home/u/.cache]"
	cases := []struct {
		name    string
		plan    *Plan
		host    tableHost
		f       Failure
		markers []string
		denied  []Denial
	}{
		{
			name: "touch ~/x",
			plan: ws, host: user,
			f:       Failure{Stderr: "touch: cannot touch '/home/u/x': Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{writeHome},
			denied:  []Denial{{Path: "/home/u/x", Op: "write"}},
		},
		{
			name: "echo > /etc/x as non-root: the OS denies it anyway",
			plan: ws, host: user,
			f: Failure{Stderr: "bash: line 1: /etc/x: Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
		},
		{
			name: "echo > /etc/x as root: the sandbox denied it",
			plan: ws, host: root,
			f:       Failure{Stderr: "bash: line 1: /etc/x: Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: write to /etc/x denied under workspace-write mode; writable: /home/u/proj, /tmp, /home/u/.cache]"},
			denied:  []Denial{{Path: "/etc/x", Op: "write"}},
		},
		{
			name: "git commit works",
			plan: ws, host: user,
			f: Failure{Stderr: "", ExitCode: 0, Workdir: "/home/u/proj"},
		},
		{
			name: "a failure without a denial",
			plan: ws, host: user,
			f: Failure{Stderr: "fatal: not a git repository\n", ExitCode: 128, Workdir: "/home/u/proj"},
		},
		{
			name: "echo x > .git/hooks/pre-commit",
			plan: ws, host: user,
			f:       Failure{Stderr: "bash: line 1: .git/hooks/pre-commit: Read-only file system\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: /home/u/proj/.git/hooks/pre-commit is read-only (protected)]"},
			denied:  []Denial{{Path: "/home/u/proj/.git/hooks/pre-commit", Op: "write"}},
		},
		{
			name: "git config rewriting a protected file",
			plan: ws, host: user,
			f:       Failure{Stderr: "error: could not lock config file .git/config: Read-only file system\n", ExitCode: 255, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: /home/u/proj/.git/config is read-only (protected)]"},
			denied:  []Denial{{Path: "/home/u/proj/.git/config", Op: "write"}},
		},
		{
			name: "curl with network off",
			plan: &off, host: user,
			f:       Failure{Stderr: "curl: (6) Could not resolve host: example.com\n", ExitCode: 6, Workdir: "/home/u/proj", Command: "curl -sS https://example.com"},
			markers: []string{"[sandbox: network is off for commands]"},
			denied:  []Denial{{Op: "network"}},
		},
		{
			name: "TCP denied by Landlock with network off",
			plan: &off, host: root,
			f:       Failure{Stderr: "bash: connect: Permission denied\nbash: line 1: /dev/tcp/127.0.0.1/80: Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: network is off for commands]"},
			denied:  []Denial{{Op: "network"}},
		},
		{
			name: "git replacing a protected config by rename",
			plan: ws, host: user,
			f:       Failure{Stderr: "error: could not write config file .git/config: Device or resource busy\n", ExitCode: 4, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: /home/u/proj/.git/config is read-only (protected)]"},
			denied:  []Denial{{Path: "/home/u/proj/.git/config", Op: "write"}},
		},
		{
			name: "moving a pinned .git aside",
			plan: ws, host: user,
			f:       Failure{Stderr: "mv: cannot move '.git' to '.git2': Device or resource busy\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: /home/u/proj/.git is read-only (protected)]"},
			denied:  []Denial{{Path: "/home/u/proj/.git", Op: "write"}},
		},
		{
			name: "a busy device elsewhere is not the sandbox",
			plan: ws, host: root,
			f: Failure{Stderr: "rmdir: failed to remove '/mnt/x': Device or resource busy\n", ExitCode: 1, Workdir: "/home/u/proj"},
		},
		{
			name: "getent hosts with network off fails silently",
			plan: &off, host: user,
			f:       Failure{ExitCode: 2, Workdir: "/home/u/proj", Command: "getent hosts example.com"},
			markers: []string{"[sandbox: network is off for commands]"},
			denied:  []Denial{{Op: "network"}},
		},
		{
			name: "getent hosts with network on is not the sandbox",
			plan: ws, host: user,
			f: Failure{ExitCode: 2, Workdir: "/home/u/proj", Command: "getent hosts example.com"},
		},
		{
			name: "python3 -c writing outside",
			plan: ws, host: user,
			f:       Failure{Stderr: "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nPermissionError: [Errno 13] Permission denied: '/home/u/x'\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{writeHome},
			denied:  []Denial{{Path: "/home/u/x", Op: "write"}},
		},
		{
			name: "a symlink inside the workspace pointing out of it",
			plan: ws, host: user,
			f:       Failure{Stderr: "bash: line 1: out/x: Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: write to /home/u/elsewhere/x denied under workspace-write mode; writable: /home/u/proj, /tmp, /home/u/.cache]"},
			denied:  []Denial{{Path: "/home/u/elsewhere/x", Op: "write"}},
		},
		{
			name: "read-only mode writing in the workspace",
			plan: ro, host: user,
			f:       Failure{Stderr: "mkdir: cannot create directory ‘build’: Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: write to /home/u/proj/build denied under read-only mode; writable: /tmp]"},
			denied:  []Denial{{Path: "/home/u/proj/build", Op: "write"}},
		},
		{
			name: "a denial without a path",
			plan: ws, host: user,
			f:       Failure{Stderr: "ping: socket: Operation not permitted\n", ExitCode: 2, Workdir: "/home/u/proj"},
			markers: []string{"[sandbox: file access denied under workspace-write mode]"},
		},
		{
			name: "full access names nothing",
			plan: full, host: user,
			f: Failure{Stderr: "touch: cannot touch '/etc/x': Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
		},
		{
			name: "the same path twice is named once",
			plan: ws, host: user,
			f:       Failure{Stderr: "touch: cannot touch '/home/u/x': Permission denied\ntouch: cannot touch '/home/u/x': Permission denied\n", ExitCode: 1, Workdir: "/home/u/proj"},
			markers: []string{writeHome},
			denied:  []Denial{{Path: "/home/u/x", Op: "write"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			markers, r := Attribute(c.plan, c.f, c.host)
			if diff := cmp.Diff(c.markers, markers); diff != "" {
				t.Errorf("markers (-want +got):\n%s", diff)
			}
			want := Report{Mode: c.plan.Mode, Network: c.plan.Network, Denied: c.denied}
			if want.Denied == nil {
				want.Denied = []Denial{}
			}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportJSON pins the structured value as a client receives it.
func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(Report{Mode: WorkspaceWrite, Network: NetworkOff, Denied: []Denial{{Path: "/x", Op: "write"}, {Op: "network"}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"mode":"workspace-write","network":"off","denied":[{"path":"/x","op":"write"},{"op":"network"}]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	_, r := Attribute(&Plan{Mode: ReadOnly, Network: NetworkOn}, Failure{}, tableHost{})
	if b, _ := json.Marshal(r); string(b) != `{"mode":"read-only","network":"on","denied":[]}` {
		t.Errorf("nothing denied: JSON %s, want an empty denied list", b)
	}
}

func TestDegradedNote(t *testing.T) {
	if DegradedNote != "Commands run without a file sandbox on this host." {
		t.Errorf("DegradedNote = %q", DegradedNote)
	}
}

// TestOSHostResolve: a path resolves through its existing symlinks, and a
// dangling link (a relative one, through a second one) resolves to the
// file a write through it would create.
func TestOSHostResolve(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, out := filepath.Join(dir, "ws"), filepath.Join(dir, "out")
	for _, d := range []string{ws, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"dir":    out,
		"first":  "second",
		"second": "../out/new",
		"loop":   "loop",
	} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]string{
		filepath.Join(ws, "x"):          filepath.Join(ws, "x"),
		filepath.Join(ws, "dir", "a/b"): filepath.Join(out, "a/b"),
		filepath.Join(ws, "first"):      filepath.Join(out, "new"),
		filepath.Join(ws, "loop"):       filepath.Join(ws, "loop"),
	} {
		if got := (OSHost{}).Resolve(path); got != want {
			t.Errorf("Resolve(%s) = %s, want %s", path, got, want)
		}
	}
}
