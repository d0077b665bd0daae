//go:build linux

package nsinit

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// identityMap maps to themselves the ids this process's user namespace
// has: the ranges of its uid_map or gid_map (file), by their ids inside.
// In the initial namespace that is every id (0 0 4294967295); root of a
// namespace with a partial map (rootless podman, Kubernetes' hostUsers:
// false, `unshare -r`) has only its ranges, and a map of every id would
// be refused (docs/containment.md). A file that cannot be read gives
// every id, as before.
func identityMap(file string) []syscall.SysProcIDMap {
	all := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
	f, err := os.Open(file)
	if err != nil {
		return all
	}
	defer f.Close()
	var m []syscall.SysProcIDMap
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(fields[0], 10, 32)
		size, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil || size == 0 {
			continue
		}
		m = append(m, syscall.SysProcIDMap{ContainerID: int(inside), HostID: int(inside), Size: int(size)})
	}
	if len(m) == 0 {
		return all
	}
	return m
}

// setgroupsAllowed reports whether this process's user namespace allows
// setgroups: a child namespace cannot allow what its parent denies
// (`unshare -r` writes "deny").
func setgroupsAllowed() bool {
	b, err := os.ReadFile("/proc/self/setgroups")
	return err != nil || strings.TrimSpace(string(b)) != "deny"
}
