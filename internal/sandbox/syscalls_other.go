//go:build linux && !amd64 && !arm64

package sandbox

// sysABIs is empty where conch has no system call table: the
// supervisor does not run there (see supervisorUnavailable).
var sysABIs []sysABI
