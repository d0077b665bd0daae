//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RestrictSetuid loads, on the calling thread, a seccomp filter that
// keeps the setuid and setgid bits off every file a command creates or
// changes: chmod, fchmod, fchmodat, fchmodat2, creat, mknod, mknodat, and
// open and openat with O_CREAT or O_TMPFILE fail with EPERM when their
// mode has S_ISUID or S_ISGID (a mode of 06000 & m != 0). openat2 carries
// its mode behind a pointer, which a filter cannot read: it fails with
// ENOSYS, on which its callers (glibc, Go) fall back to openat. io_uring
// opens files with a mode too, where no filter sees it: io_uring_setup
// fails with ENOSYS. The 32-bit compat ABI (i386 on amd64, arm on arm64)
// and x32 get the same filter.
//
// It holds in every sandbox mode, full-access included: without it, a
// root server's command could leave a setuid-root program in /tmp for any
// user of the host to run (docs/sandbox.md#setuid-and-setgid). The
// calling thread needs no_new_privs or CAP_SYS_ADMIN in its user
// namespace (the init has both or the latter). A kernel without seccomp
// filters fails: the init then refuses to start.
func RestrictSetuid() error {
	prog := noSetuidProgram(runtime.GOARCH)
	if prog == nil {
		return fmt.Errorf("setuid filter: no system call table for %s", runtime.GOARCH)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("setuid filter: %w", errno)
	}
	return nil
}

// setuidABI is one system call ABI's numbers of the calls the setuid
// filter looks at; -1 where the ABI has no such call.
type setuidABI struct {
	arch   uint32
	x32    bool // the ABI also serves x32 calls (the number's bit 30 set)
	chmod  int64
	fchmod int64
	fchmodat, fchmodat2,
	creat, mknod, mknodat,
	open, openat, openat2,
	ioUringSetup int64
}

// setuidABIs are the ABIs a filter of GOARCH must cover: the native one
// first, then the compat one.
var setuidABIs = map[string][]setuidABI{
	"amd64": {
		{arch: unix.AUDIT_ARCH_X86_64, x32: true, chmod: 90, fchmod: 91, fchmodat: 268, fchmodat2: 452,
			creat: 85, mknod: 133, mknodat: 259, open: 2, openat: 257, openat2: 437, ioUringSetup: 425},
		{arch: unix.AUDIT_ARCH_I386, chmod: 15, fchmod: 94, fchmodat: 306, fchmodat2: 452,
			creat: 8, mknod: 14, mknodat: 297, open: 5, openat: 295, openat2: 437, ioUringSetup: 425},
	},
	"arm64": {
		{arch: unix.AUDIT_ARCH_AARCH64, chmod: -1, fchmod: 52, fchmodat: 53, fchmodat2: 452,
			creat: -1, mknod: -1, mknodat: 33, open: -1, openat: 56, openat2: 437, ioUringSetup: 425},
		{arch: unix.AUDIT_ARCH_ARM, chmod: 15, fchmod: 94, fchmodat: 333, fchmodat2: 452,
			creat: 8, mknod: 14, mknodat: 324, open: 5, openat: 322, openat2: 437, ioUringSetup: 425},
	},
}

// The bits the filter looks for: in a mode, setuid and setgid; in open's
// flags, the two that make it create a file (O_TMPFILE's own bit,
// __O_TMPFILE, is the same on every architecture here).
const (
	setuidBits   = unix.S_ISUID | unix.S_ISGID
	createsFlags = unix.O_CREAT | 0o20000000
)

// noSetuidProgram assembles the filter for goarch (nil: unknown).
func noSetuidProgram(goarch string) []unix.SockFilter {
	abis, ok := setuidABIs[goarch]
	if !ok {
		return nil
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		nrOff = 0 // offsetof(struct seccomp_data, nr)
		arOff = 4 // offsetof(struct seccomp_data, arch)
		x32   = 0x40000000
	)
	// argOff is the offset of args[i]'s low half (little-endian: every
	// architecture in setuidABIs).
	argOff := func(i int) uint32 { return 16 + 8*uint32(i) }
	var a asm
	allow := a.newLabel()
	deny := a.newLabel()
	nosys := a.newLabel()
	a.op(ldW, arOff)
	abiLabels := make([]label, len(abis))
	for i, abi := range abis {
		abiLabels[i] = a.newLabel()
		a.jump(jeq, abi.arch, abiLabels[i], -1)
	}
	a.ret(allow)
	for i, abi := range abis {
		a.mark(abiLabels[i])
		a.op(ldW, nrOff)
		if abi.x32 {
			a.op(and, ^uint32(x32))
		}
		type check struct {
			nr          int64
			flags, mode int // argument indexes; flags -1: none
		}
		checks := []check{
			{abi.chmod, -1, 1}, {abi.fchmod, -1, 1}, {abi.fchmodat, -1, 2}, {abi.fchmodat2, -1, 2},
			{abi.creat, -1, 1}, {abi.mknod, -1, 1}, {abi.mknodat, -1, 2},
			{abi.open, 1, 2}, {abi.openat, 2, 3},
		}
		labels := make([]label, len(checks))
		for k, c := range checks {
			if c.nr < 0 {
				continue
			}
			labels[k] = a.newLabel()
			a.jump(jeq, uint32(c.nr), labels[k], -1)
		}
		a.jump(jeq, uint32(abi.openat2), nosys, -1)
		a.jump(jeq, uint32(abi.ioUringSetup), nosys, -1)
		a.ret(allow)
		for k, c := range checks {
			if c.nr < 0 {
				continue
			}
			a.mark(labels[k])
			if c.flags >= 0 {
				// Without O_CREAT or O_TMPFILE the mode is ignored.
				a.op(ldW, argOff(c.flags))
				a.jump(jset, createsFlags, -1, allow)
			}
			a.op(ldW, argOff(c.mode))
			a.jump(jset, setuidBits, deny, allow)
		}
	}
	a.mark(allow)
	a.op(ret, unix.SECCOMP_RET_ALLOW)
	a.mark(deny)
	a.op(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.mark(nosys)
	a.op(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	return a.assemble()
}

// asm is a tiny classic-BPF assembler with forward labels: jumps name
// labels, resolved into offsets once every label is placed.
type asm struct {
	ins    []unix.SockFilter
	jumps  []pendingJump
	labels []int // label → instruction index (-1: not placed yet)
}

type label int

type pendingJump struct {
	at     int
	jt, jf label // -1: the next instruction
}

func (a *asm) newLabel() label {
	a.labels = append(a.labels, -1)
	return label(len(a.labels) - 1)
}

func (a *asm) mark(l label) { a.labels[l] = len(a.ins) }

func (a *asm) op(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

// jump appends a conditional jump to jt when the condition holds, else
// to jf; -1 stands for the next instruction.
func (a *asm) jump(code uint16, k uint32, jt, jf label) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), jt: jt, jf: jf})
	a.op(code, k)
}

// ret jumps to l unconditionally (a conditional jump both ways: classic
// BPF's JA takes a 32-bit offset, but the two-way form keeps one code
// path).
func (a *asm) ret(l label) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.ins), jt: l, jf: l})
	a.op(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, 0)
}

func (a *asm) assemble() []unix.SockFilter {
	for _, j := range a.jumps {
		off := func(l label) uint8 {
			if l < 0 {
				return 0
			}
			d := a.labels[l] - (j.at + 1)
			if a.labels[l] < 0 || d < 0 || d > 255 {
				panic(fmt.Sprintf("sandbox: bpf jump from %d to label %d (at %d) out of range", j.at, l, a.labels[l]))
			}
			return uint8(d)
		}
		a.ins[j.at].Jt, a.ins[j.at].Jf = off(j.jt), off(j.jf)
	}
	return a.ins
}
