// Package serverid reads what names a conch process on its machine for
// good, so that another conch can tell, later, whether that process
// still runs: the machine (its hostname and machine id), its boot, and
// the process's pid and start time. A pid alone could have been reused
// by another process since; with its start time since boot it cannot.
//
// The shell/remote transports that start containers or pods of their own
// label them with these, and sweep those of conch processes that died
// without removing them (docs/remote.md).
package serverid

import (
	"os"
	"strconv"
	"strings"
)

// Hostname is the machine's hostname, a '/' in it replaced by '_' (the
// labels that carry it separate their fields with '/').
func Hostname() string {
	h, _ := os.Hostname()
	return strings.ReplaceAll(h, "/", "_")
}

// BootID is the kernel's random id of this boot, or "" where the system
// has none (no /proc).
func BootID() string { return readLine("/proc/sys/kernel/random/boot_id") }

// MachineID is the id of this installation, the same across its boots
// (/etc/machine-id, else D-Bus's copy of it), or "" when it has none (a
// container image often has none).
func MachineID() string {
	for _, f := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if id := readLine(f); id != "" {
			return strings.ReplaceAll(id, "/", "_")
		}
	}
	return ""
}

// StartTime is the start time of process pid since boot, in clock ticks
// (/proc/<pid>/stat's 22nd field), or "" when there is no such process.
func StartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func readLine(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
