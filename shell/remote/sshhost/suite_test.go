//go:build linux

package sshhost_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/remotetest"
	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/sshhost"
	"github.com/conch-dev/conch/shell/shelltest"
)

// environWrapper is the ForceCommand of the suite's sshd. The suite asks
// for the environment commands start from (shelltest.Config.Environ); a
// login's environment is sshd's, so an agent command that ends with
// '--test-environ' 'FILE' runs with FILE's NUL-separated variables only,
// and without those two arguments. Every other command (the probe, the
// upload) runs as sshd would run it.
const environWrapper = `#!/bin/bash
c=$SSH_ORIGINAL_COMMAND
case $c in
*" '--test-environ' '"*)
	file=${c##*" '--test-environ' '"}
	file=${file%"'"}
	c=${c%" '--test-environ' '"*}
	mapfile -d '' vars < "$file"
	eval "set -- ${c#exec }"
	exec env -i "${vars[@]}" "$@"
esac
exec /bin/bash -c "$c"
`

// TestSuite runs the provider suite against a real conch agent, deployed
// and started through sshhost on a real sshd, with the suite's settings
// passed as the agent's flags and its default containment and sandbox
// (its terminal cases included: the agent's executor has terminals).
// It logs in as root: the suite's directories (its workdirs, its spill
// parents) are the test process's, made by t.TempDir. A case the suite
// runs again as nobody (testutil.AsUnprivileged) logs in as the
// unprivileged test user, on the same sshd, which the root run started.
func TestSuite(t *testing.T) {
	// The host has the agent already (startSuiteHost preloads it): each
	// case's executor dials on its own, and all of them at once would
	// each upload it (tens of megabytes) side by side.
	h := startSuiteHost(t)
	shelltest.Run(t, func(t *testing.T, c shelltest.Config) shell.Executor {
		env, marker := remotetest.AgentEnviron(c)
		environ := remotetest.EnvironFile(t, h.dir, env)
		args := remotetest.AgentArgs(c)
		ex, err := sshhost.New(sshhost.Host{Name: "h1", SSH: h.user + "@" + h.addr, Cwd: c.Cwd}, &sshhost.Options{
			SSHConfig:     filepath.Join(h.dir, "no-ssh-config"),
			KnownHosts:    []string{filepath.Join(h.dir, "known_hosts")},
			IdentityFiles: []string{filepath.Join(h.dir, "id_ed25519")},
			AgentSocket:   "none",
			AgentBinary:   filepath.Join(h.dir, "conch"),
			AgentArgs:     append(args, "--test-environ", environ),
			Stderr:        h.stderr,
			Executor:      remote.Options{Timeout: c.Timeout, MaxTimeout: c.MaxTimeout, DialTimeout: 2 * time.Minute},
		})
		if err != nil {
			t.Fatalf("sshhost.New: %v", err)
		}
		// Only this executor's agent, known by its TMPDIR: the suite's
		// cases run in parallel, each with an agent of its own.
		t.Cleanup(func() { (&sshdtest.Server{Cache: h.cache}).AssertNoAgentsWith(t, "TMPDIR="+c.SpillParent) })
		// Connected before the suite's first call, which it may time: a
		// local executor needs no connection either.
		if _, err := ex.Hello(t.Context()); err != nil {
			ex.Close()
			t.Fatalf("connect: %v", err)
		}
		return remotetest.Marked{Executor: ex, Marker: marker}
	})
}

// suiteEnv carries the suite's sshd from the root run to a run as nobody:
// its address, the shared directory, its cache.
const suiteEnv = "CONCH_TEST_SUITE_SSHD"

// suiteHost is the sshd of TestSuite and what logs in to it.
type suiteHost struct {
	user, addr string
	// dir holds the wrapper, the client key, known_hosts and the
	// environment files: everyone reads it, everyone makes files in it.
	dir, cache string
	stderr     *testutil.Buffer
}

// startSuiteHost starts the suite's sshd, as root, or finds the one the root
// run started, as nobody.
func startSuiteHost(t *testing.T) *suiteHost {
	h := &suiteHost{user: "root", stderr: new(testutil.Buffer)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent stderr:\n%s", h.stderr.String())
		}
	})
	if v := os.Getenv(suiteEnv); v != "" && os.Geteuid() != 0 {
		h.user = sshdtest.User
		if f := strings.Split(v, "\n"); len(f) == 3 {
			h.addr, h.dir, h.cache = f[0], f[1], f[2]
			return h
		}
		t.Fatalf("%s=%q: want address, directory and cache, one a line", suiteEnv, v)
	}
	dir, err := os.MkdirTemp("", "conch-suite-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "environ-wrapper")
	if err := os.WriteFile(wrapper, []byte(environWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startSSHD(t, "ForceCommand "+wrapper, "MaxStartups 100")
	// The agent lives in the test user's cache, whoever logs in, and is
	// the test user's: root runs it as well, whereas a copy root
	// uploaded (root's, 0700) would make the run as nobody upload its
	// own. The preload's check at cleanup comes after every case's.
	preload(t, srv.Cache, testutil.ConchBinary(t))
	key, err := os.ReadFile(srv.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	// The agent binary and a test key, readable by the run as nobody.
	bin, err := os.ReadFile(testutil.ConchBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conch"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "id_ed25519"), key, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(srv.KnownHostsLine(srv.Port)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.addr, h.dir, h.cache = srv.Addr(), dir, srv.Cache
	// TestSuite is not parallel: nothing else runs while it sets this.
	os.Setenv(suiteEnv, h.addr+"\n"+h.dir+"\n"+h.cache)
	t.Cleanup(func() { os.Unsetenv(suiteEnv) })
	return h
}
