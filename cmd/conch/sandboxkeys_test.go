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
// sandbox.unix_sockets (and --unix-socket, and --pass-env SSH_AUTH_SOCK)
// lets commands connect to a socket by its path, while without it a
// unix socket connect is refused with its marker and one outside the
// sandbox works (docs/sandbox.md#unix-sockets).
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
	if out, errOut, _ := testutil.RunConch(t, marker, "run", "--sandbox", "full-access", "--cwd", ws, "--", connect); out != "connected\n" {
		t.Fatalf("without a sandbox: stdout %q, stderr %q; want connected", out, errOut)
	}
	if out, errOut, _ := run("", connect); strings.Contains(out, "connected") || !strings.Contains(out, "refused: Permission denied") {
		t.Errorf("workspace-write: stdout %q, stderr %q; want the connect refused", out, errOut)
	}
	if out, errOut, _ := run("", connect); !strings.HasSuffix(out, "[sandbox: connect to unix socket "+sock+" denied under workspace-write mode]\n[exit code: 13]\n") {
		t.Errorf("workspace-write: stdout %q, stderr %q; want the unix socket marker", out, errOut)
	}
	if out, errOut, code := run(`unix_sockets = ["`+sock+`"]`+"\n", connect); code != 0 || out != "connected\n" {
		t.Errorf("unix_sockets: exit %d, stdout %q, stderr %q; want connected", code, out, errOut)
	}
	if out, errOut, code := testutil.RunConch(t, marker, "run", "--unix-socket", sock, "--cwd", ws, "--", connect); code != 0 || out != "connected\n" {
		t.Errorf("--unix-socket: exit %d, stdout %q, stderr %q; want connected", code, out, errOut)
	}
	// The SSH agent's socket, passed through by the user, is listed.
	cmd := testutil.Conch(t, marker, "run", "--pass-env", "SSH_AUTH_SOCK", "--cwd", ws, "--", strings.ReplaceAll(connect, `"`+sock+`"`, `$ENV{SSH_AUTH_SOCK}`))
	cmd.Env = append(cmd.Env, "SSH_AUTH_SOCK="+sock)
	if out, err := cmd.Output(); err != nil || string(out) != "connected\n" {
		t.Errorf("--pass-env SSH_AUTH_SOCK: %v, stdout %q; want connected", err, out)
	}
}
