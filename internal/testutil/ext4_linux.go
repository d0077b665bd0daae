//go:build linux

package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// MountExt4 makes an ext4 file system of size bytes in a file under t's
// temporary directory, with mkfs.ext4's options opts (e.g. "-O",
// "^has_journal"), mounts it on a loop device and returns where; it is
// unmounted (and its loop device let go) when t ends. It needs root;
// t is skipped where the machine has no loop devices (a container).
func MountExt4(t testing.TB, size int64, opts ...string) string {
	t.Helper()
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices on this machine: %v", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", append(append([]string{"-q", "-F"}, opts...), img)...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %v: %v\n%s", opts, err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}
