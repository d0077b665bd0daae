//go:build linux && arm64

package sandbox

import "golang.org/x/sys/unix"

// sysABIs: arm64 and the 32-bit arm (EABI) compat ABI. arm and arm64
// share their open flags (O_DIRECTORY and O_NOFOLLOW differ from
// x86's, but not between the two).
var sysABIs = []sysABI{
	{
		arch:   unix.AUDIT_ARCH_AARCH64,
		socket: unix.SYS_SOCKET, socketpair: unix.SYS_SOCKETPAIR, ioUringSetup: unix.SYS_IO_URING_SETUP, openat2: unix.SYS_OPENAT2,
		setxattrat: unix.SYS_SETXATTRAT, removexattrat: unix.SYS_REMOVEXATTRAT,
		ops: map[uint32]sysOp{
			unix.SYS_OPENAT:  sysOpenat,
			unix.SYS_MKDIRAT: sysMkdirat, unix.SYS_MKNODAT: sysMknodat,
			unix.SYS_RENAMEAT: sysRenameat, unix.SYS_RENAMEAT2: sysRenameat2,
			unix.SYS_LINKAT: sysLinkat, unix.SYS_SYMLINKAT: sysSymlinkat, unix.SYS_UNLINKAT: sysUnlinkat,
			unix.SYS_TRUNCATE: sysTruncate,
			unix.SYS_FCHMOD:   sysFchmod, unix.SYS_FCHMODAT: sysFchmodat, unix.SYS_FCHMODAT2: sysFchmodat2,
			unix.SYS_FCHOWN: sysFchown, unix.SYS_FCHOWNAT: sysFchownat,
			unix.SYS_SETXATTR: sysSetxattr, unix.SYS_LSETXATTR: sysLsetxattr, unix.SYS_FSETXATTR: sysFsetxattr,
			unix.SYS_REMOVEXATTR: sysRemovexattr, unix.SYS_LREMOVEXATTR: sysLremovexattr, unix.SYS_FREMOVEXATTR: sysFremovexattr,
			unix.SYS_CONNECT: sysConnect, unix.SYS_BIND: sysBind,
		},
	},
	{
		// arch/arm/tools/syscall.tbl (EABI)
		arch: unix.AUDIT_ARCH_ARM, compat: true,
		socket: 281, socketpair: 288, ioUringSetup: 425, openat2: 437, setxattrat: 463, removexattrat: 466,
		ops: map[uint32]sysOp{
			5: sysOpen, 322: sysOpenat, 8: sysCreat,
			39: sysMkdir, 323: sysMkdirat, 14: sysMknod, 324: sysMknodat,
			38: sysRename, 329: sysRenameat, 382: sysRenameat2,
			9: sysLink, 330: sysLinkat, 83: sysSymlink, 331: sysSymlinkat,
			10: sysUnlink, 328: sysUnlinkat, 40: sysRmdir,
			92: sysTruncate, 193: sysTruncate64,
			15: sysChmod, 94: sysFchmod, 333: sysFchmodat, 452: sysFchmodat2,
			182: sysChown16, 16: sysLchown16, 95: sysFchown16, 212: sysChown, 198: sysLchown, 207: sysFchown, 325: sysFchownat,
			226: sysSetxattr, 227: sysLsetxattr, 228: sysFsetxattr, 235: sysRemovexattr, 236: sysLremovexattr, 237: sysFremovexattr,
			283: sysConnect, 282: sysBind,
		},
	},
}
