//go:build linux && amd64

package sandbox

import "golang.org/x/sys/unix"

// sysABIs: x86-64 (with x32's calls refused) and the i386 compat ABI.
var sysABIs = []sysABI{
	{
		arch: unix.AUDIT_ARCH_X86_64, nrLimit: 0x40000000,
		socket: unix.SYS_SOCKET, socketpair: unix.SYS_SOCKETPAIR, ioUringSetup: unix.SYS_IO_URING_SETUP, openat2: unix.SYS_OPENAT2,
		setxattrat: unix.SYS_SETXATTRAT, removexattrat: unix.SYS_REMOVEXATTRAT,
		ops: map[uint32]sysOp{
			unix.SYS_OPEN: sysOpen, unix.SYS_OPENAT: sysOpenat, unix.SYS_CREAT: sysCreat,
			unix.SYS_MKDIR: sysMkdir, unix.SYS_MKDIRAT: sysMkdirat, unix.SYS_MKNOD: sysMknod, unix.SYS_MKNODAT: sysMknodat,
			unix.SYS_RENAME: sysRename, unix.SYS_RENAMEAT: sysRenameat, unix.SYS_RENAMEAT2: sysRenameat2,
			unix.SYS_LINK: sysLink, unix.SYS_LINKAT: sysLinkat, unix.SYS_SYMLINK: sysSymlink, unix.SYS_SYMLINKAT: sysSymlinkat,
			unix.SYS_UNLINK: sysUnlink, unix.SYS_UNLINKAT: sysUnlinkat, unix.SYS_RMDIR: sysRmdir,
			unix.SYS_TRUNCATE: sysTruncate,
			unix.SYS_CHMOD:    sysChmod, unix.SYS_FCHMOD: sysFchmod, unix.SYS_FCHMODAT: sysFchmodat, unix.SYS_FCHMODAT2: sysFchmodat2,
			unix.SYS_CHOWN: sysChown, unix.SYS_LCHOWN: sysLchown, unix.SYS_FCHOWN: sysFchown, unix.SYS_FCHOWNAT: sysFchownat,
			unix.SYS_SETXATTR: sysSetxattr, unix.SYS_LSETXATTR: sysLsetxattr, unix.SYS_FSETXATTR: sysFsetxattr,
			unix.SYS_REMOVEXATTR: sysRemovexattr, unix.SYS_LREMOVEXATTR: sysLremovexattr, unix.SYS_FREMOVEXATTR: sysFremovexattr,
			unix.SYS_CONNECT: sysConnect, unix.SYS_BIND: sysBind,
		},
	},
	{
		// arch/x86/entry/syscalls/syscall_32.tbl
		arch: unix.AUDIT_ARCH_I386, compat: true,
		socket: 359, socketpair: 360, socketcall: 102, ioUringSetup: 425, openat2: 437, setxattrat: 463, removexattrat: 466,
		ops: map[uint32]sysOp{
			5: sysOpen, 295: sysOpenat, 8: sysCreat,
			39: sysMkdir, 296: sysMkdirat, 14: sysMknod, 297: sysMknodat,
			38: sysRename, 302: sysRenameat, 353: sysRenameat2,
			9: sysLink, 303: sysLinkat, 83: sysSymlink, 304: sysSymlinkat,
			10: sysUnlink, 301: sysUnlinkat, 40: sysRmdir,
			92: sysTruncate, 193: sysTruncate64,
			15: sysChmod, 94: sysFchmod, 306: sysFchmodat, 452: sysFchmodat2,
			182: sysChown16, 16: sysLchown16, 95: sysFchown16, 212: sysChown, 198: sysLchown, 207: sysFchown, 298: sysFchownat,
			226: sysSetxattr, 227: sysLsetxattr, 228: sysFsetxattr, 235: sysRemovexattr, 236: sysLremovexattr, 237: sysFremovexattr,
			362: sysConnect, 361: sysBind,
		},
	},
}
