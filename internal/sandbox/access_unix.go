//go:build unix

package sandbox

import "golang.org/x/sys/unix"

// access reports whether this process may write path (access(2)), so that
// OSHost.CanWrite works wherever the policy is computed, Linux or not.
func access(path string) bool { return unix.Access(path, unix.W_OK) == nil }
