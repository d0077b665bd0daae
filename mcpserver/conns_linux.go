package mcpserver

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pending reports whether bytes the client sent wait in the kernel to
// be read.
func (c *limitedConn) pending() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	return n > 0
}
