//go:build linux

package nsinit_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Helpers the supervisor tests run as commands inside a sandboxed init
// (the test binary, dispatched by TestMain): they need threads and raw
// system calls that a shell cannot give.

// atFDCWD is AT_FDCWD as a system call argument.
var atFDCWD = unix.AT_FDCWD

// raceDuration is how long a racer races.
func raceDuration() time.Duration {
	ms, err := strconv.Atoi(os.Getenv("RACE_MS"))
	if err != nil {
		ms = 2000
	}
	return time.Duration(ms) * time.Millisecond
}

// flipper rewrites buf with a and b in turn, on a thread of its own,
// until stop: a thread changing a path in memory while another thread
// of the process is in a system call that names it.
func flipper(buf, a, b []byte, stop *atomic.Bool) {
	runtime.LockOSThread()
	for !stop.Load() {
		copy(buf, a)
		copy(buf, b)
	}
}

// padded is s NUL-terminated in n bytes.
func padded(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

// raceOpenHelper opens RACE_A for writing (O_CREAT) again and again for
// RACE_MS while a thread flips the path to RACE_B (a protected name),
// and prints how many opens created a file, were refused, or failed
// otherwise.
func raceOpenHelper() int {
	a, b := os.Getenv("RACE_A"), os.Getenv("RACE_B")
	n := max(len(a), len(b)) + 1
	buf := padded(a, n)
	var stop atomic.Bool
	go flipper(buf, padded(a, n), padded(b, n), &stop)
	var created, refused, other int
	for deadline := time.Now().Add(raceDuration()); time.Now().Before(deadline); {
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(int64(atFDCWD)), uintptr(unsafe.Pointer(&buf[0])),
			uintptr(unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC), 0o644, 0, 0)
		switch errno {
		case 0:
			created++
			unix.Close(int(fd))
		case unix.EROFS:
			refused++
		default:
			other++
		}
	}
	stop.Store(true)
	runtime.KeepAlive(buf)
	fmt.Printf("created %d refused %d other %d\n", created, refused, other)
	return 0
}

// raceConnectHelper listens on RACE_A (its own socket, which the
// sandbox allows), then connects a new unix socket to it again and again
// for RACE_MS while a thread flips the address to RACE_B (one it
// refuses), and prints how many connects worked and how many were
// refused.
func raceConnectHelper() int {
	a, b := os.Getenv("RACE_A"), os.Getenv("RACE_B")
	l, err := net.Listen("unix", a)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	n := 2 + max(len(a), len(b)) + 1
	addr := func(p string) []byte {
		sa := make([]byte, n)
		binary.NativeEndian.PutUint16(sa, unix.AF_UNIX)
		copy(sa[2:], p)
		return sa
	}
	buf := addr(a)
	var stop atomic.Bool
	go flipper(buf, addr(a), addr(b), &stop)
	var connected, refused, other int
	for deadline := time.Now().Add(raceDuration()); time.Now().Before(deadline); {
		s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("socket:", err)
			return 1
		}
		_, _, errno := syscall.Syscall(syscall.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(&buf[0])), uintptr(n))
		switch errno {
		case 0:
			connected++
		case unix.EACCES:
			refused++
		default:
			other++
		}
		unix.Close(s)
	}
	stop.Store(true)
	runtime.KeepAlive(buf)
	fmt.Printf("connected %d refused %d other %d\n", connected, refused, other)
	return 0
}

// selfSocketHelper listens on the unix socket SOCK_NAME (a path, or
// @name for an abstract one), connects to it and echoes a line through
// it: a command's own socket.
func selfSocketHelper() int {
	name := os.Getenv("SOCK_NAME")
	l, err := net.Listen("unix", name)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	c, err := net.Dial("unix", name)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	c.Write([]byte("ok\n"))
	b := make([]byte, 3)
	if _, err := io.ReadFull(c, b); err != nil {
		fmt.Println("read:", err)
		return 1
	}
	fmt.Print(string(b))
	return 0
}

// dialHelper connects to the unix socket SOCK_NAME and says whether it
// could.
func dialHelper() int {
	c, err := net.Dial("unix", os.Getenv("SOCK_NAME"))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	c.Close()
	fmt.Println("connected")
	return 0
}

// raceFDSwapHelper connects descriptor swapFD to the unix socket RACE_B
// (binds it to that path with RACE_OP=bind) again and again while a
// thread of its own puts an internet socket and a unix socket at that
// number in turn: a supervisor that judged the descriptor it found and
// then let the kernel run the call would judge the internet socket and
// connect (or bind) the unix one.
func raceFDSwapHelper() int {
	call := unix.Connect
	if os.Getenv("RACE_OP") == "bind" {
		call = unix.Bind
	}
	const swapFD = 100
	sa := &unix.SockaddrUnix{Name: os.Getenv("RACE_B")}
	var inet, local atomic.Int64
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		for !stop.Load() {
			unix.Dup3(int(inet.Load()), swapFD, unix.O_CLOEXEC)
			unix.Dup3(int(local.Load()), swapFD, unix.O_CLOEXEC)
		}
	}()
	var connected, refused, other int
	for deadline := time.Now().Add(raceDuration()); time.Now().Before(deadline); {
		i, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("socket:", err)
			return 1
		}
		u, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("socket:", err)
			return 1
		}
		inet.Store(int64(i))
		local.Store(int64(u))
		switch err := call(swapFD, sa); err {
		case nil:
			connected++
		case unix.EACCES:
			refused++
		default:
			other++
		}
		// The flipper may still hold either number for a moment: close
		// them once it has moved on to the next pair.
		unix.Close(i)
		unix.Close(u)
	}
	stop.Store(true)
	<-done
	fmt.Printf("connected %d refused %d other %d\n", connected, refused, other)
	return 0
}

// connectWaitHelper makes a blocking socket, prints the name of its open
// file ("socket:[inode]"), and connects it to CONNECT_TCP (a port of
// 127.0.0.1) or CONNECT_UNIX (a path) with a blocking connect, after
// setting SO_SNDTIMEO to CONNECT_TIMEOUT_MS when given; it prints
// "connected" or the error.
func connectWaitHelper() int {
	dom, sa := unix.AF_UNIX, unix.Sockaddr(&unix.SockaddrUnix{Name: os.Getenv("CONNECT_UNIX")})
	if port := os.Getenv("CONNECT_TCP"); port != "" {
		n, _ := strconv.Atoi(port)
		dom, sa = unix.AF_INET, &unix.SockaddrInet4{Port: n, Addr: [4]byte{127, 0, 0, 1}}
	}
	s, err := unix.Socket(dom, unix.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("socket:", err)
		return 1
	}
	if ms, _ := strconv.Atoi(os.Getenv("CONNECT_TIMEOUT_MS")); ms > 0 {
		tv := unix.NsecToTimeval(int64(ms) * 1e6)
		if err := unix.SetsockoptTimeval(s, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
			fmt.Println("SO_SNDTIMEO:", err)
			return 1
		}
	}
	name, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(s))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(name)
	if err := unix.Connect(s, sa); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("connected")
	return 0
}
