//go:build linux

package seccompnotify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
)

// Action is what a filter returns for a system call.
type Action uint32

const (
	Allow  Action = unix.SECCOMP_RET_ALLOW
	Notify Action = unix.SECCOMP_RET_USER_NOTIF
)

// Errno makes the system call fail with e, unrun.
func Errno(e unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA)
}

// Cond tests the low 32 bits of argument Arg: with Mask 0, that they
// equal Value; else that (arg & Mask) == Value, or with Any, that
// (arg & Mask) != 0.
type Cond struct {
	Arg   int
	Mask  uint32
	Value uint32
	Any   bool
}

// Rule is the action for system call Nr: Action when every Cond holds
// (or there is none), else Else.
type Rule struct {
	Nr     uint32
	Conds  []Cond
	Action Action
	Else   Action
}

// ABI is the rules for one system call architecture (AUDIT_ARCH_*).
// NrLimit, when not zero, makes every call numbered at or above it fail
// with ENOSYS (x32's calls share x86-64's architecture with bit 30 set).
type ABI struct {
	Arch    uint32
	Rules   []Rule
	NrLimit uint32
}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// Program assembles a filter: for each ABI, its rules (the first rule of
// a number wins), every other call of that ABI allowed; calls of any
// other architecture allowed.
func Program(abis []ABI) ([]unix.SockFilter, error) {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	// Each ABI's block is assembled on its own, then laid out after a
	// dispatch on the architecture whose jumps reach them.
	var blocks [][]unix.SockFilter
	for _, abi := range abis {
		var b []unix.SockFilter
		b = append(b, unix.SockFilter{Code: ld, K: offNr})
		if abi.NrLimit != 0 {
			b = append(b,
				unix.SockFilter{Code: jge, K: abi.NrLimit, Jt: 0, Jf: 1},
				unix.SockFilter{Code: ret, K: uint32(Errno(unix.ENOSYS))})
		}
		for _, r := range abi.Rules {
			var body []unix.SockFilter
			if len(r.Conds) == 0 {
				body = []unix.SockFilter{{Code: ret, K: uint32(r.Action)}}
			} else {
				// Each test falls through when it holds and jumps to
				// the Else return at the end when it does not.
				var tests []int
				for _, c := range r.Conds {
					body = append(body, unix.SockFilter{Code: ld, K: offArgs + 8*uint32(c.Arg)}) // the low half (little-endian)
					switch {
					case c.Any:
						body = append(body, unix.SockFilter{Code: jset, K: c.Mask})
					case c.Mask != 0:
						body = append(body, unix.SockFilter{Code: and, K: c.Mask}, unix.SockFilter{Code: jeq, K: c.Value})
					default:
						body = append(body, unix.SockFilter{Code: jeq, K: c.Value})
					}
					tests = append(tests, len(body)-1)
				}
				body = append(body, unix.SockFilter{Code: ret, K: uint32(r.Action)}, unix.SockFilter{Code: ret, K: uint32(r.Else)})
				elseAt := len(body) - 1
				for _, at := range tests {
					d := elseAt - (at + 1)
					if d > 255 {
						return nil, fmt.Errorf("seccompnotify: rule for %d too long", r.Nr)
					}
					body[at].Jf = uint8(d)
				}
			}
			if len(body) > 255 {
				return nil, fmt.Errorf("seccompnotify: rule for %d too long", r.Nr)
			}
			// Not this call: skip the body.
			b = append(b, unix.SockFilter{Code: jeq, K: r.Nr, Jt: 0, Jf: uint8(len(body))})
			b = append(b, body...)
		}
		b = append(b, unix.SockFilter{Code: ret, K: uint32(Allow)})
		blocks = append(blocks, b)
	}
	// Dispatch on the architecture, laid out as
	//	ld arch; jeq_0 … jeq_n-1; ret allow; ja_0 … ja_n-1; block_0 … block_n-1
	// jeq_i jumps n instructions ahead, to ja_i, a jump of any length
	// to block_i.
	prog := []unix.SockFilter{{Code: ld, K: offArch}}
	n := len(abis)
	const ja = unix.BPF_JMP | unix.BPF_JA
	start := 1 + n + 1 + n // where block_0 starts
	for _, abi := range abis {
		prog = append(prog, unix.SockFilter{Code: jeq, K: abi.Arch, Jt: uint8(n), Jf: 0})
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: uint32(Allow)})
	at := start
	for i := range abis {
		pc := 1 + n + 1 + i
		prog = append(prog, unix.SockFilter{Code: ja, K: uint32(at - (pc + 1))})
		at += len(blocks[i])
	}
	for _, b := range blocks {
		prog = append(prog, b...)
	}
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccompnotify: %d instructions, more than %d", len(prog), unix.BPF_MAXINSNS)
	}
	return prog, nil
}

// Load installs prog on the calling thread only (commands it forks
// inherit it; other threads of the process are not filtered) and, when
// listen, returns the listener of its notifications. The thread must
// have no_new_privs set or CAP_SYS_ADMIN.
func Load(prog []unix.SockFilter, listen bool) (*Listener, error) {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var flags uintptr
	if listen {
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
	}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return nil, fmt.Errorf("seccompnotify: load the filter: %w", errno)
	}
	if !listen {
		return nil, nil
	}
	l := newListener(int(fd))
	// The answer wakes the caller on the supervisor's CPU, as a pipe's
	// reader is woken by its writer (Linux 6.6; before, EINVAL and the
	// usual wake-ups). The notification's like hint, to wake the
	// supervisor on the caller's CPU, reaches a Receiver's epoll wait
	// only as a plain synchronous wake-up (Linux 6.13), if at all.
	// Each of 3,000 supervised opens back to back cost a sixth less
	// (docs/sandbox.md#the-supervisor).
	_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, ioctlSetFlags, syncWakeUp)
	l.syncWake = errno == 0
	return l, nil
}

// Run interprets prog on d as the kernel's classic BPF would (for the
// instructions Program emits), for tests of a filter's rules.
func Run(prog []unix.SockFilter, d Data) (uint32, error) {
	var buf [64]byte
	binary.LittleEndian.PutUint32(buf[offNr:], uint32(d.Nr))
	binary.LittleEndian.PutUint32(buf[offArch:], d.Arch)
	binary.LittleEndian.PutUint64(buf[8:], d.InstructionPointer)
	for i, a := range d.Args {
		binary.LittleEndian.PutUint64(buf[offArgs+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		jump := func(cond bool) {
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		}
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if int(in.K)+4 > len(buf) {
				return 0, fmt.Errorf("load out of bounds at %d", pc)
			}
			acc = binary.LittleEndian.Uint32(buf[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= in.K
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			jump(acc == in.K)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			jump(acc >= in.K)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			jump(acc&in.K != 0)
		case unix.BPF_RET | unix.BPF_K:
			return in.K, nil
		default:
			return 0, fmt.Errorf("unknown instruction %#x at %d", in.Code, pc)
		}
	}
	return 0, errors.New("the program ends without returning")
}

// Supported reports whether this kernel notifies a supervisor with
// everything this package needs (Linux 5.19: user notification, the
// continue flag, descriptors sent as the answer, and the killable wait
// after receipt), and if not, why.
func Supported() error {
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))); errno != 0 {
		return fmt.Errorf("seccomp user notification unavailable: %w", errno)
	}
	major, minor, err := proc.KernelRelease()
	if err != nil {
		return fmt.Errorf("seccomp user notification: %w", err)
	}
	if major < 5 || major == 5 && minor < 19 {
		return fmt.Errorf("seccomp user notification: kernel %d.%d lacks what the supervisor needs (5.19)", major, minor)
	}
	return nil
}
