//go:build linux

package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Daemons that are not ours: a process re-parented to this one (a child
// subreaper) is an escapee of a command, which a kill of all takes, which
// a command's kill takes when it started while the command ran, and
// which makes every kill look for leftovers. A container engine that
// conch itself runs leaves daemons of its own the same way: rootless
// podman's pause process, which holds the user namespace of every one of
// the user's rootless containers (killed, the user's podman answers
// "invalid internal status" until `podman system migrate`), and the
// conmon of each exec and container. Those are the engine's, not a
// command's: they outlive conch as they would outlive any other client.
var spared struct {
	mu    sync.Mutex
	names map[string]bool
}

// SpareDaemons makes every kill, leftover check and attribution of this
// process leave alone the processes re-parented to it whose executable's
// base name is one of names, and which root owns and only root may
// write (a container engine's daemons: "podman",
// "catatonit", "conmon"); their zombies are still reaped. It is for the
// transports that run an engine themselves, never for a command's
// programs: under a contained executor a command's processes are never
// re-parented to this process (their init adopts them), and without
// containment no promise holds against a command that runs podman.
func SpareDaemons(names ...string) {
	spared.mu.Lock()
	defer spared.mu.Unlock()
	if spared.names == nil {
		spared.names = make(map[string]bool)
	}
	for _, n := range names {
		spared.names[n] = true
	}
}

// isSpared reports whether pid, a process re-parented to us, runs an
// executable SpareDaemons named. One readlink, and none while nothing is
// spared.
func isSpared(pid int) bool {
	spared.mu.Lock()
	none := len(spared.names) == 0
	spared.mu.Unlock()
	if none {
		return false
	}
	link := "/proc/" + strconv.Itoa(pid) + "/exe"
	exe, err := os.Readlink(link)
	if err != nil {
		return false // gone, a zombie, or a kernel thread: nothing to spare
	}
	spared.mu.Lock()
	named := spared.names[filepath.Base(exe)]
	spared.mu.Unlock()
	// The engine's own binary, installed by root and writable by no one
	// else: a command's copy of sleep named podman is not spared.
	var st unix.Stat_t
	return named && unix.Stat(link, &st) == nil && st.Uid == 0 && st.Mode&0o022 == 0
}
