//go:build !linux

package mcpserver

// pending reports whether bytes the client sent wait in the kernel to
// be read; elsewhere than Linux (where conch serves nothing) it cannot
// tell, and says no.
func (c *limitedConn) pending() bool { return false }
