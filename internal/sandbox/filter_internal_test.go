//go:build linux && amd64

package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/seccompnotify"
)

// TestFilterRules runs the sandbox's filter, as the kernel would, on the
// system calls it treats specially, native and i386.
func TestFilterRules(t *testing.T) {
	const x64, i386 = unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_I386
	notify, allow := uint32(seccompnotify.Notify), uint32(seccompnotify.Allow)
	eacces, enosys := uint32(seccompnotify.Errno(unix.EACCES)), uint32(seccompnotify.Errno(unix.ENOSYS))
	type call struct {
		arch uint32
		nr   int32
		args [6]uint64
	}
	cases := []struct {
		name              string
		supervised, reads bool
		c                 call
		want              uint32
	}{
		{"read", true, false, call{x64, unix.SYS_READ, [6]uint64{}}, allow},
		{"openat for reading", true, false, call{x64, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_RDONLY | unix.O_CLOEXEC}}, allow},
		{"openat for reading with deny_read", true, true, call{x64, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_RDONLY}}, notify},
		{"openat for writing", true, false, call{x64, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_WRONLY}}, notify},
		{"open with O_CREAT", true, false, call{x64, unix.SYS_OPEN, [6]uint64{0, unix.O_CREAT}}, notify},
		{"open with O_TRUNC", true, false, call{x64, unix.SYS_OPEN, [6]uint64{0, unix.O_TRUNC}}, notify},
		{"mkdir", true, false, call{x64, unix.SYS_MKDIR, [6]uint64{}}, notify},
		{"renameat2", true, false, call{x64, unix.SYS_RENAMEAT2, [6]uint64{}}, notify},
		{"fchmod", true, false, call{x64, unix.SYS_FCHMOD, [6]uint64{}}, notify},
		{"connect", true, false, call{x64, unix.SYS_CONNECT, [6]uint64{}}, notify},
		{"openat2", true, false, call{x64, unix.SYS_OPENAT2, [6]uint64{}}, enosys},
		{"io_uring_setup", true, false, call{x64, unix.SYS_IO_URING_SETUP, [6]uint64{}}, eacces},
		{"a unix stream socket", true, false, call{x64, unix.SYS_SOCKET, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC}}, allow},
		{"a unix datagram socket", true, false, call{x64, unix.SYS_SOCKET, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK}}, eacces},
		{"a unix datagram socket pair", true, false, call{x64, unix.SYS_SOCKETPAIR, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}}, eacces},
		{"a unix stream socket pair", true, false, call{x64, unix.SYS_SOCKETPAIR, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}}, allow},
		{"an internet datagram socket", true, false, call{x64, unix.SYS_SOCKET, [6]uint64{unix.AF_INET, unix.SOCK_DGRAM}}, allow},
		{"x32", true, false, call{x64, 0x40000000 | unix.SYS_OPEN, [6]uint64{}}, enosys},
		{"i386 open for writing", true, false, call{i386, 5, [6]uint64{0, unix.O_WRONLY}}, notify},
		{"i386 open for reading", true, false, call{i386, 5, [6]uint64{0, unix.O_RDONLY}}, allow},
		{"i386 mkdirat", true, false, call{i386, 296, [6]uint64{}}, notify},
		{"i386 socketcall", true, false, call{i386, 102, [6]uint64{}}, eacces},
		{"i386 a unix datagram socket", true, false, call{i386, 359, [6]uint64{unix.AF_UNIX, unix.SOCK_DGRAM}}, eacces},
		{"i386 connect", true, false, call{i386, 362, [6]uint64{}}, notify},
		{"unsupervised: openat for writing", false, false, call{x64, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_WRONLY}}, allow},
		{"unsupervised: a unix stream socket", false, false, call{x64, unix.SYS_SOCKET, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}}, eacces},
		{"unsupervised: i386 a unix socket", false, false, call{i386, 359, [6]uint64{unix.AF_UNIX, unix.SOCK_STREAM}}, eacces},
	}
	for _, c := range cases {
		prog, err := seccompnotify.Program(filterABIs(c.supervised, c.reads, false))
		if err != nil {
			t.Fatal(err)
		}
		got, err := seccompnotify.Run(prog, seccompnotify.Data{Nr: c.c.nr, Arch: c.c.arch, Args: c.c.args})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
