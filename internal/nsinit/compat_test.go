//go:build linux

package nsinit_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/sandbox"
)

// The compat filter (internal/sandbox, loadCompatFilter) denies in the
// 32-bit ABI what the main filter denies in the 64-bit one. A process
// reaches that ABI in two ways on amd64: as a 32-bit program (i386), or
// as a 64-bit program that executes `int $0x80`, which the kernel serves
// as an i386 system call (seccomp sees AUDIT_ARCH_I386). Both are tested.
//
// A kernel can run without its 32-bit ABI (CONFIG_IA32_EMULATION off,
// or ia32_emulation=0, the default of CONFIG_IA32_EMULATION_DEFAULT_DISABLED):
// then exec of an i386 program fails with ENOEXEC, and `int $0x80` finds
// no gate in the interrupt table, so the CPU raises a general protection
// fault, which the kernel delivers as SIGSEGV before any system call is
// made (the 32-bit `syscall` entry returns ENOSYS there too). No system
// call then reaches the compat ABI, so there is nothing for the filter to
// deny, and the tests skip saying so; they learn it by running each
// program outside the sandbox first.

// dialI386 is an i386 program that connects to the unix socket named by
// its argument (Go's net package uses socketcall on i386).
const dialI386 = `package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c.Close()
}
`

// int80Main is a 64-bit program that opens a unix socket through the
// i386 system call table (int $0x80), once with socket (359) and once
// with socketcall (102, SYS_SOCKET), and prints what each returned (or,
// with exit status 3, that the instruction faulted). Its
// arguments for socketcall live in a global, below 4 GiB in a non-PIE
// binary, where a 32-bit pointer reaches them.
const int80Main = `package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"
)

func int80(nr, a1, a2, a3 uintptr) uintptr

// Package variables: in the binary's data, below 4 GiB, where the i386
// ABI's 32-bit pointers reach.
var (
	socketcallArgs = [3]uint32{1, 1, 0} // AF_UNIX, SOCK_STREAM, 0
	sockaddr       [110]byte            // struct sockaddr_un: the family, then the path
)

func main() {
	// Where the kernel serves no int $0x80 the CPU faults (SIGSEGV):
	// say so with exit status 3 instead of crashing.
	debug.SetPanicOnFault(true)
	defer func() {
		if recover() != nil {
			fmt.Println("int $0x80: fault")
			os.Exit(3)
		}
	}()
	failed := false
	call := func(name string, nr, a1, a2, a3 uintptr) int32 {
		r := int32(int80(nr, a1, a2, a3))
		if r < 0 {
			fmt.Printf("%s: errno %d\n", name, -r)
			failed = true
		} else {
			fmt.Printf("%s: ok\n", name)
		}
		return r
	}
	call("socket dgram", 359, 1, 2, 0) // AF_UNIX, SOCK_DGRAM
	call("socketcall", 102, 1, uintptr(unsafe.Pointer(&socketcallArgs)), 0)
	if fd := call("socket stream", 359, 1, 1, 0); fd >= 0 {
		sockaddr[0] = 1 // AF_UNIX
		n := copy(sockaddr[2:], os.Args[1])
		call("connect", 362, uintptr(fd), uintptr(unsafe.Pointer(&sockaddr)), uintptr(2+n+1))
	}
	if failed {
		os.Exit(1)
	}
}
`

const int80Asm = `#include "textflag.h"

// func int80(nr, a1, a2, a3 uintptr) uintptr
TEXT ·int80(SB),NOSPLIT,$0-40
	MOVQ nr+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ a2+16(FP), CX
	MOVQ a3+24(FP), DX
	INT $0x80
	MOVQ AX, ret+32(FP)
	RET
`

// buildProgram builds the Go program of files (name → text) for goarch
// into dir and returns its path.
func buildProgram(t *testing.T, dir, goarch string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["go.mod"] = "module prog\n\ngo 1.21\n"
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "prog", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the %s program: %v\n%s", goarch, err, out)
	}
	return filepath.Join(dir, "prog")
}

// skipWithoutIA32 skips t when running prog outside any sandbox shows that
// this kernel runs no 32-bit code: exec fails with ENOEXEC (an i386
// program) or `int $0x80` faults (int80Main's exit status 3).
func skipWithoutIA32(t *testing.T, prog string, args ...string) {
	t.Helper()
	out, err := exec.Command(prog, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.Is(err, syscall.ENOEXEC):
		t.Skipf("this kernel runs no i386 program (exec: %v; ia32 emulation is off): no system call reaches the 32-bit ABI, so the compat filter has nothing to deny", err)
	case errors.As(err, &ee) && ee.ExitCode() == 3 && string(out) == "int $0x80: fault\n":
		t.Skipf("this kernel serves no int $0x80 (it faults with SIGSEGV; ia32 emulation is off): no system call reaches the 32-bit ABI, so the compat filter has nothing to deny")
	case err != nil:
		t.Fatalf("outside the sandbox %s failed: %v\n%s", filepath.Base(filepath.Dir(prog)), err, out)
	}
}

// TestSandboxUnixSocketsCompat: a 32-bit program (i386 system calls,
// socketcall) cannot open a unix socket in the sandbox, and it can
// without one. Root only: the filter does not depend on the user, and
// the build is slow with a cold cache.
func TestSandboxUnixSocketsCompat(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the compat check builds an i386 program: amd64 only")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the i386 program")
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	prog := buildProgram(t, filepath.Join(h.home, "dial386"), "386", map[string]string{"main.go": dialI386})
	sock := acceptingSocket(t, filepath.Join(h.home, "sock"))
	skipWithoutIA32(t, prog, sock)
	script := prog + " " + sock
	bare, _ := startSandboxed(t, nil)
	if code, _, stderr := h.runIn(t, bare, script); code != 0 {
		t.Fatalf("without a sandbox the i386 connect failed: %s", stderr)
	}
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	if code, _, stderr := h.runIn(t, in, script); code == 0 {
		t.Errorf("in the sandbox an i386 program connected to a unix socket (%q)", stderr)
	}
}

// TestSandboxUnixSocketsInt80: a 64-bit program that makes i386 system
// calls with `int $0x80` cannot reach a unix socket in the sandbox: a
// datagram socket (whose sendto names any socket) and socketcall (whose
// connect the filter cannot see) are denied with EACCES, and a stream
// socket's connect (i386's own system call) is judged by the supervisor
// and denied; without a sandbox each works. Where the host has no
// supervisor, the stream socket itself is denied.
func TestSandboxUnixSocketsInt80(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("int $0x80 is an amd64 instruction")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the program")
	}
	marker := clean(t)
	h := newSandboxHost(t, marker)
	prog := buildProgram(t, filepath.Join(h.home, "int80"), "amd64", map[string]string{
		"main.go": int80Main, "int80_amd64.s": int80Asm,
	})
	sock := acceptingSocket(t, filepath.Join(h.home, "sock"))
	skipWithoutIA32(t, prog, sock)
	script := prog + " " + sock
	bare, _ := startSandboxed(t, nil)
	if code, stdout, stderr := h.runIn(t, bare, script); code != 0 || stdout != "socket dgram: ok\nsocketcall: ok\nsocket stream: ok\nconnect: ok\n" {
		t.Fatalf("without a sandbox: status %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	p := h.policy(sandbox.NetworkOn)
	in, _ := startSandboxed(t, &p)
	eacces := "errno " + strconv.Itoa(int(syscall.EACCES))
	want := "socket dgram: " + eacces + "\nsocketcall: " + eacces + "\nsocket stream: ok\nconnect: " + eacces + "\n"
	if sandbox.SupervisorUnavailable() != nil {
		want = "socket dgram: " + eacces + "\nsocketcall: " + eacces + "\nsocket stream: " + eacces + "\n"
	}
	if code, stdout, stderr := h.runIn(t, in, script); code == 0 || stdout != want {
		t.Errorf("in the sandbox: status %d, stdout %q (want %q), stderr %q", code, stdout, want, strings.TrimSpace(stderr))
	}
}
