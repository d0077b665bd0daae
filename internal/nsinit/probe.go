//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/prestart"
)

// ErrUnavailable matches (errors.Is) every *UnavailableError.
var ErrUnavailable = errors.New("nsinit: containment unavailable")

// UnavailableError says that this host does not let conch start an init:
// Cause names the host setting to blame when one is known ("user
// namespaces are disabled (user.max_user_namespaces = 0)"), else it is
// empty; Err is what failed.
type UnavailableError struct {
	Cause string
	Err   error
}

func (e *UnavailableError) Error() string {
	if e.Cause == "" {
		return e.Err.Error()
	}
	return e.Cause + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// unavailable wraps err, a failure to create or set up the namespaces, in
// an *UnavailableError with the host's cause.
func unavailable(err error) error {
	return &UnavailableError{Cause: userNSCause(), Err: err}
}

// userNSCause names the host setting that turns user namespaces off for
// this process, or returns "".
func userNSCause() string {
	if readSysctl("user/max_user_namespaces") == "0" {
		return "user namespaces are disabled (user.max_user_namespaces = 0)"
	}
	if os.Geteuid() != 0 && readSysctl("kernel/unprivileged_userns_clone") == "0" {
		return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
	}
	if os.Geteuid() != 0 && readSysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" {
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
	}
	return ""
}

func readSysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Report is what this host allows, for `conch doctor` and the start-up
// log.
type Report struct {
	// UserNS and PIDNS are nil when a user namespace, and a PID namespace
	// inside it, can be created; else why not.
	UserNS, PIDNS error
	// Cgroup is the cgroup v2 hierarchy of this process.
	Cgroup Cgroup
}

// Cgroup describes the cgroup v2 hierarchy as this process sees it.
type Cgroup struct {
	// Mount is where cgroup v2 is mounted ("" if nowhere), Dir this
	// process's own cgroup under it.
	Mount, Dir string
	// Writable: this process may create cgroups under Dir (root, or a
	// delegated subtree).
	Writable bool
}

// Probe tries what this host allows: it creates a user namespace, then
// a PID namespace inside one (each around a run of `true`), and looks
// for cgroup v2 in /proc/self/mountinfo.
func Probe() Report {
	var r Report
	r.UserNS = tryNamespaces(syscall.CLONE_NEWUSER)
	if r.UserNS != nil {
		r.PIDNS = r.UserNS
	} else {
		r.PIDNS = tryNamespaces(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS)
	}
	r.Cgroup = ProbeCgroup()
	return r
}

// Summary is the containment the report allows, as the start-up log and
// `conch doctor` say it: "pid-namespace, cgroup" (with a cgroup per
// command where cgroup v2 is writable), "pid-namespace", or
// "none (<cause>)".
func (r Report) Summary() string {
	switch {
	case r.PIDNS != nil:
		return "none (" + r.PIDNS.Error() + ")"
	case r.Cgroup.Writable:
		return "pid-namespace, cgroup"
	}
	return "pid-namespace"
}

func tryNamespaces(flags uintptr) error {
	bin, err := exec.LookPath("true")
	if err != nil {
		bin = "/bin/true"
	}
	cmd := exec.Command(bin)
	a := prestart.Attr()
	a.Cloneflags = flags
	a.AmbientCaps = nil
	a.Setpgid = false // in this process's group: no orphan reaper takes it
	cmd.SysProcAttr = a
	if err := cmd.Run(); err != nil {
		return unavailable(err)
	}
	return nil
}

// ProbeCgroup is Probe's Cgroup alone: it reads /proc/self and spawns
// nothing, for a caller that learns whether namespaces work by starting
// an init (docs/containment.md#in-conch).
func ProbeCgroup() Cgroup {
	var cg Cgroup
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return cg
	}
	cg.Mount = cgroupMount(mi, "cgroup2", "")
	if cg.Mount == "" {
		return cg
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return cg
	}
	for line := range strings.Lines(string(self)) {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			cg.Dir = filepath.Join(cg.Mount, strings.TrimSpace(rest))
		}
	}
	if cg.Dir != "" {
		cg.Writable = unix.Access(cg.Dir, unix.W_OK) == nil
	}
	return cg
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
