package mcpserver

import "time"

// DelayDelete makes the server wait d before the SDK answers a DELETE, as
// a loaded machine may, for a test; it returns what restores it.
func DelayDelete(d time.Duration) func() {
	old := deleteDelay
	deleteDelay = d
	return func() { deleteDelay = old }
}
