//go:build linux

package testutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// npmStamp, in node_modules, holds the SHA-256 of the package-lock.json
// that node_modules was installed from. npm ci removes node_modules
// first and NPMFixture writes the stamp last, so a stamp that matches
// means a complete install of the pinned versions.
const npmStamp = ".conch-package-lock.sha256"

// NPMFixture makes sure that the npm packages pinned by dir's
// package-lock.json are installed in dir/node_modules, and returns the
// absolute path of that node_modules. It runs `npm ci --no-audit
// --no-fund` in dir when node_modules is missing or was installed from
// another package-lock.json (or by hand: only NPMFixture leaves the stamp
// it trusts), which needs Node.js and npm and, the first time, the npm
// registry.
//
// Test binaries run in parallel: an exclusive lock on dir/.conch-npm.lock
// makes one of them install while the others wait, and then find the
// install done.
func NPMFixture(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("npm fixture %s: %w", dir, err)
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", fmt.Errorf("npm fixture: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := []byte(hex.EncodeToString(sum[:]) + "\n")
	modules := filepath.Join(dir, "node_modules")
	stamp := filepath.Join(modules, npmStamp)

	lf, err := os.OpenFile(filepath.Join(dir, ".conch-npm.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("npm fixture %s: lock: %w", dir, err)
	}
	defer lf.Close() // releases the lock
	if err := flock(lf); err != nil {
		return "", fmt.Errorf("npm fixture %s: lock: %w", dir, err)
	}
	if got, err := os.ReadFile(stamp); err == nil && bytes.Equal(got, want) {
		return modules, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm fixture %s: installing it needs Node.js 20 or later and npm: %w", dir, err)
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm fixture %s: npm ci: %w\n%s", dir, err, out)
	}
	// A lock without dependencies installs no node_modules at all.
	if err := os.MkdirAll(modules, 0o755); err != nil {
		return "", fmt.Errorf("npm fixture %s: %w", dir, err)
	}
	if err := os.WriteFile(stamp, want, 0o644); err != nil {
		return "", fmt.Errorf("npm fixture %s: %w", dir, err)
	}
	return modules, nil
}

// flock takes an exclusive lock on f, waiting for it (a signal that
// interrupts the wait does not end it).
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
