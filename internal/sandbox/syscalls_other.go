//go:build linux && !amd64 && !arm64

package sandbox

import (
	"fmt"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// sysABIs is empty where conch has no system call table: the
// supervisor does not run there (see supervisorUnavailable).
var sysABIs []sysABI

func init() { loadPlainFilter = plainFilter }

// plainFilter is the filter of an architecture without a system call
// table here: go-seccomp-bpf's, for the native ABI only.
func plainFilter(plan *Plan, unenforced []string) ([]string, error) {
	if len(plan.UnixSockets) > 0 {
		return append(unenforced, "unix sockets by path (seccomp cannot see a path; all unix sockets allowed)"), nil
	}
	if !seccompAvailable() {
		return append(unenforced, "unix sockets (seccomp unavailable)"), nil
	}
	filter := seccomp.Filter{
		NoNewPrivs: true,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{{
				Action: seccomp.ActionErrno | seccomp.Action(unix.EACCES),
				Names:  []string{"io_uring_setup"},
				NamesWithCondtions: []seccomp.NameWithConditions{{
					Name:       "socket",
					Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX}},
				}},
			}},
		},
	}
	if err := seccomp.LoadFilter(filter); err != nil {
		return nil, fmt.Errorf("sandbox: seccomp: %w", err)
	}
	return unenforced, nil
}
