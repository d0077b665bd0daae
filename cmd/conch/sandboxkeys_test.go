//go:build linux

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestSandboxConfigKeys: the configuration's sandbox.deny_read hides a
// file (it reads empty) and a directory (it lists empty) from commands;
// sandbox.unix_sockets, which this host cannot enforce by path, makes
// conch refuse to start naming the cause, while without it a unix socket
// connect is refused and one outside the sandbox works
// (docs/sandbox.md#in-conch).
func TestSandboxConfigKeys(t *testing.T) {
	t.Parallel()
	// Outside /tmp, which the sandbox leaves writable.
	base, err := os.MkdirTemp("/var/tmp", "conch-keys-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ws, secret, private := filepath.Join(base, "ws"), filepath.Join(base, "secret"), filepath.Join(base, "private")
	writeFile(t, secret, "s3cret\n")
	writeFile(t, filepath.Join(private, "key"), "k3y\n")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(base, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepts: a connect completes in its backlog
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	run := func(config, command string) (string, string, int) {
		cfg := filepath.Join(base, "config.toml")
		writeFile(t, cfg, "[sandbox]\nmode = \"workspace-write\"\n"+config)
		return testutil.RunConch(t, marker, "run", "--config", cfg, "--cwd", ws, "--", command)
	}

	out, errOut, _ := run(`deny_read = ["`+secret+`", "`+private+`"]`+"\n",
		"cat "+secret+"; ls -A "+private+"; cat "+filepath.Join(private, "key")+"; echo done")
	if strings.Contains(out, "s3cret") || strings.Contains(out, "k3y") || strings.Contains(out, "key\n") || !strings.Contains(out, "done") {
		t.Errorf("deny_read: stdout %q, stderr %q; want the file empty and the directory empty", out, errOut)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "s3cret\n" {
		t.Errorf("the host's copy of the denied file: %q, %v", b, err)
	}

	connect := `perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => "` + sock + `") or die "refused: $!\n"; print "connected\n"'`
	if out, errOut, _ := testutil.RunConch(t, marker, "run", "--cwd", ws, "--", connect); out != "connected\n" {
		t.Fatalf("without a sandbox: stdout %q, stderr %q; want connected", out, errOut)
	}
	if out, errOut, _ := run("", connect); strings.Contains(out, "connected") || !strings.Contains(out, "refused: Permission denied") {
		t.Errorf("workspace-write: stdout %q, stderr %q; want the connect refused", out, errOut)
	}
	_, errOut, code := run(`unix_sockets = ["`+sock+`"]`+"\n", connect)
	const want = "conch run: sandbox workspace-write: this host cannot enforce unix sockets by path (seccomp cannot see a path; all unix sockets allowed)\n"
	if code != 2 || errOut != want {
		t.Errorf("unix_sockets: exit %d, stderr %q; want 2 and %q", code, errOut, want)
	}
}
