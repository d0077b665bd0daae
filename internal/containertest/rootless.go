//go:build linux

package containertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/sshdtest"
)

// RootlessPodman is podman run by an ordinary user: its containers live
// in a user namespace that maps root to that user and the other ids to
// the user's subordinate range (/etc/subuid), a partial map. It is the
// engine most developers' machines run rootless.
type RootlessPodman struct {
	// Uid and Gid are the user's (sshdtest.User's).
	Uid, Gid uint32
	// Env is the environment its podman, and a conch that drives it, run
	// with: HOME, PATH, XDG_RUNTIME_DIR and CONTAINERS_CONF (Setup's).
	Env []string
	// Engine is a script that runs podman as the user with Env, for the
	// functions of this package that take an engine (Image, Start, Run).
	Engine string
}

var (
	rootlessOnce sync.Once
	rootless     *RootlessPodman
	rootlessErr  error
)

// Rootless returns the rootless podman of sshdtest.User, making the
// user (sshdtest.EnsureUser), its subordinate ids and its runtime
// directory when missing. It fails t when newuidmap is missing (.ci/run
// installs uidmap) or CONTAINERS_CONF is not set (call Setup from
// TestMain).
func Rootless(t testing.TB) *RootlessPodman {
	t.Helper()
	Podman(t)
	u := sshdtest.EnsureUser(t)
	rootlessOnce.Do(func() { rootless, rootlessErr = newRootless(u.Uid, u.Gid, u.HomeDir) })
	if rootlessErr != nil {
		t.Fatalf("containertest: rootless podman: %v", rootlessErr)
	}
	return rootless
}

func newRootless(uidText, gidText, home string) (*RootlessPodman, error) {
	uid, err := strconv.ParseUint(uidText, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(gidText, 10, 32)
	if err != nil {
		return nil, err
	}
	// useradd gives a new user ranges on Debian; a user made otherwise
	// gets one here, far above the ranges useradd hands out.
	if !hasRange("/etc/subuid", sshdtest.User, uidText) || !hasRange("/etc/subgid", sshdtest.User, uidText) {
		if out, err := exec.Command("usermod", "--add-subuids", subRange, "--add-subgids", subRange, sshdtest.User).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("give %s subordinate ids: usermod: %v: %s", sshdtest.User, err, out)
		}
	}
	if _, err := exec.LookPath("newuidmap"); err != nil {
		return nil, fmt.Errorf("no newuidmap: apt-get install -y uidmap (.ci/run does)")
	}
	conf := os.Getenv("CONTAINERS_CONF")
	if conf == "" {
		return nil, fmt.Errorf("CONTAINERS_CONF is not set: call containertest.Setup from TestMain")
	}
	// podman's runtime state outlives a test binary as its storage in
	// the user's home does: one directory per machine and user.
	run := filepath.Join(os.TempDir(), fmt.Sprintf("conch-podman-run-%d", uid))
	if err := os.MkdirAll(run, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(run, int(uid), int(gid)); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "conch-rootless-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	r := &RootlessPodman{
		Uid: uint32(uid), Gid: uint32(gid),
		Env:    []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "XDG_RUNTIME_DIR=" + run, "CONTAINERS_CONF=" + conf},
		Engine: filepath.Join(dir, "podman"),
	}
	script := fmt.Sprintf("#!/bin/sh\nexec setpriv --reuid=%d --regid=%d --clear-groups env -i %s podman \"$@\"\n", uid, gid, strings.Join(r.Env, " "))
	if err := os.WriteFile(r.Engine, []byte(script), 0o755); err != nil {
		return nil, err
	}
	rootlessDir = dir
	return r, nil
}

// rootlessDir holds Rootless's script; Setup's cleanup removes it.
var rootlessDir string

// subRange is the subordinate ids Rootless gives the user when it has
// none.
const subRange = "2000000-2065535"

// hasRange reports whether the subordinate id file f gives user (by name
// or by id) a range.
func hasRange(f, user, id string) bool {
	b, err := os.ReadFile(f)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		who, _, _ := strings.Cut(line, ":")
		if who == user || who == id {
			return true
		}
	}
	return false
}
