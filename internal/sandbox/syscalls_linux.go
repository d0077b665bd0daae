//go:build linux

package sandbox

import (
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/seccompnotify"
)

// sysOp is a system call the supervisor handles, whatever its number in
// an ABI (docs/sandbox.md#the-supervisor).
type sysOp uint8

const (
	sysNone sysOp = iota
	sysOpen
	sysOpenat
	sysCreat
	sysMkdir
	sysMkdirat
	sysMknod
	sysMknodat
	sysRename
	sysRenameat
	sysRenameat2
	sysLink
	sysLinkat
	sysSymlink
	sysSymlinkat
	sysUnlink
	sysUnlinkat
	sysRmdir
	sysTruncate
	sysTruncate64 // compat: the length in two registers
	sysChmod
	sysFchmod
	sysFchmodat
	sysFchmodat2
	sysChown
	sysLchown
	sysFchown
	sysFchownat
	sysChown16 // compat: 16-bit ids
	sysLchown16
	sysFchown16
	sysSetxattr
	sysLsetxattr
	sysFsetxattr
	sysRemovexattr
	sysLremovexattr
	sysFremovexattr
	sysConnect
	sysBind
)

var sysNames = [...]string{
	sysOpen: "open", sysOpenat: "openat", sysCreat: "creat", sysMkdir: "mkdir", sysMkdirat: "mkdirat",
	sysMknod: "mknod", sysMknodat: "mknodat", sysRename: "rename", sysRenameat: "renameat", sysRenameat2: "renameat2",
	sysLink: "link", sysLinkat: "linkat", sysSymlink: "symlink", sysSymlinkat: "symlinkat", sysUnlink: "unlink",
	sysUnlinkat: "unlinkat", sysRmdir: "rmdir", sysTruncate: "truncate", sysTruncate64: "truncate64",
	sysChmod: "chmod", sysFchmod: "fchmod", sysFchmodat: "fchmodat", sysFchmodat2: "fchmodat2",
	sysChown: "chown", sysLchown: "lchown", sysFchown: "fchown", sysFchownat: "fchownat",
	sysChown16: "chown16", sysLchown16: "lchown16", sysFchown16: "fchown16",
	sysSetxattr: "setxattr", sysLsetxattr: "lsetxattr", sysFsetxattr: "fsetxattr",
	sysRemovexattr: "removexattr", sysLremovexattr: "lremovexattr", sysFremovexattr: "fremovexattr",
	sysConnect: "connect", sysBind: "bind",
}

func (o sysOp) String() string {
	if int(o) < len(sysNames) && sysNames[o] != "" {
		return sysNames[o]
	}
	return "?"
}

// sysABI is one system call ABI the filter and the supervisor know: its
// architecture, whether it is the 32-bit compat ABI (arguments are 32
// bits wide, a descriptor like AT_FDCWD is not sign-extended), its
// supervised calls, and the numbers of the calls the filter treats
// specially (0: the ABI has none).
type sysABI struct {
	arch   uint32
	compat bool
	ops    map[uint32]sysOp
	// nrLimit: calls numbered at or above fail with ENOSYS (x32).
	nrLimit uint32

	socket, socketpair, socketcall, ioUringSetup, openat2, setxattrat, removexattrat uint32
}

// writeIntent are the open flags that make an open a write: the filter
// sends such opens to the supervisor and lets the others through.
const writeIntent = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC

// filterABIs are the filter's rules for every ABI of this architecture.
// With supervised, the supervisor's calls are notified, datagram unix
// sockets are refused (a datagram can be sent to any socket by its path
// with no connect for the supervisor to see), and openat2,
// setxattrat and removexattrat, whose arguments lie behind a pointer,
// fail with ENOSYS, as on a kernel without them, so that programs fall
// back to the calls the supervisor serves. Without supervised, it is
// the filter of a host without user notification: every unix socket is
// refused (unless allowUnix), nothing is notified. Either way io_uring
// (which opens and connects sockets past this filter) and the compat
// ABI's socketcall (whose arguments lie behind a pointer) are refused.
func filterABIs(supervised, notifyReads, allowUnix bool) []seccompnotify.ABI {
	var out []seccompnotify.ABI
	for _, a := range sysABIs {
		abi := seccompnotify.ABI{Arch: a.arch, NrLimit: a.nrLimit}
		deny := seccompnotify.Errno(unix.EACCES)
		nosys := seccompnotify.Errno(unix.ENOSYS)
		abi.Rules = append(abi.Rules, seccompnotify.Rule{Nr: a.ioUringSetup, Action: deny})
		if a.socketcall != 0 {
			abi.Rules = append(abi.Rules, seccompnotify.Rule{Nr: a.socketcall, Action: deny})
		}
		unixSocket := seccompnotify.Cond{Arg: 0, Value: unix.AF_UNIX}
		switch {
		case supervised:
			dgram := []seccompnotify.Cond{unixSocket, {Arg: 1, Mask: 0xf, Value: unix.SOCK_DGRAM}}
			abi.Rules = append(abi.Rules,
				seccompnotify.Rule{Nr: a.socket, Action: deny, Else: seccompnotify.Allow, Conds: dgram},
				seccompnotify.Rule{Nr: a.socketpair, Action: deny, Else: seccompnotify.Allow, Conds: dgram})
		case !allowUnix:
			abi.Rules = append(abi.Rules, seccompnotify.Rule{Nr: a.socket, Action: deny, Else: seccompnotify.Allow,
				Conds: []seccompnotify.Cond{unixSocket}})
		}
		if supervised {
			for _, nr := range []uint32{a.openat2, a.setxattrat, a.removexattrat} {
				if nr != 0 {
					abi.Rules = append(abi.Rules, seccompnotify.Rule{Nr: nr, Action: nosys})
				}
			}
			for nr, op := range a.ops {
				r := seccompnotify.Rule{Nr: nr, Action: seccompnotify.Notify}
				flagsArg := -1
				switch op {
				case sysOpen:
					flagsArg = 1
				case sysOpenat:
					flagsArg = 2
				}
				if flagsArg >= 0 && !notifyReads {
					r.Conds = []seccompnotify.Cond{{Arg: flagsArg, Mask: writeIntent, Any: true}}
					r.Else = seccompnotify.Allow
				}
				abi.Rules = append(abi.Rules, r)
			}
		}
		out = append(out, abi)
	}
	return out
}

// abiOf returns the ABI of arch, or nil.
func abiOf(arch uint32) *sysABI {
	for i := range sysABIs {
		if sysABIs[i].arch == arch {
			return &sysABIs[i]
		}
	}
	return nil
}
