//go:build linux

package sandbox

import (
	"net"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBoundFile: the kernel names the file a unix socket is bound to.
func TestBoundFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(*net.UnixListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, ok := boundFile(int(f.Fd()))
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if want := sockID(uint64(st.Dev), st.Ino); !ok || got != want {
		t.Errorf("boundFile = %v, %v; want %v", got, ok, want)
	}
}
