//go:build linux

package nsinit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A limit on each command (Options.MaxPids, Options.MaxMemory) is a
// controller's file in the command's cgroup (docs/containment.md#limits):
// in cgroup v2 when the session's v2 cgroup offers the controller (the
// command is born in its cgroup), else in the controller's cgroup v1
// hierarchy, where a command cannot be born in a cgroup: the init moves
// its spawner thread into the command's cgroup (a v1 tasks file moves
// one thread), forks, and moves it back, so the command starts in its
// cgroup and nothing it forks is ever outside it.
type limitSpec struct {
	controller     string
	v2File, v1File string
	value          int64
}

func limitSpecs(o Options) []limitSpec {
	return []limitSpec{
		{"pids", "pids.max", "pids.max", o.MaxPids},
		{"memory", "memory.max", "memory.limit_in_bytes", o.MaxMemory},
	}
}

// newLimits sets up the limits of o: into v2, the session's cgroup v2
// (nil without one), or one cgroup v1 hierarchy each, returned. Where a
// limit fits neither, the error names the cause.
func newLimits(o Options, v2 *cgroups) (v1 []*cgroups, err error) {
	for _, l := range limitSpecs(o) {
		if l.value <= 0 {
			continue
		}
		value := strconv.FormatInt(l.value, 10)
		if v2 != nil && offers(v2.session, l.controller) {
			if err := os.WriteFile(filepath.Join(v2.session, "cgroup.subtree_control"), []byte("+"+l.controller), 0); err == nil {
				v2.limits[l.v2File] = value
				continue
			}
		}
		g, err := newV1Cgroups(l.controller)
		if err != nil {
			for _, g := range v1 {
				g.close()
			}
			return nil, fmt.Errorf("nsinit: %s limit: %w", l.controller, err)
		}
		g.limits[l.v1File] = value
		v1 = append(v1, g)
	}
	return v1, nil
}

// offers reports whether the cgroup v2 dir offers controller to the
// cgroups made in it.
func offers(dir, controller string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	return err == nil && slices.Contains(strings.Fields(string(b)), controller)
}

// newV1Cgroups makes the session's cgroup in controller's cgroup v1
// hierarchy, under this process's own cgroup there.
func newV1Cgroups(controller string) (*cgroups, error) {
	dir, err := v1Dir(controller)
	if err != nil {
		return nil, err
	}
	g, err := newCgroups(dir)
	if err != nil {
		return nil, fmt.Errorf("cgroup v1 %s: %w", dir, errors.Unwrap(err))
	}
	g.v1 = true
	if g.home, err = os.OpenFile(filepath.Join(g.session, "tasks"), os.O_WRONLY, 0); err != nil {
		g.close()
		return nil, fmt.Errorf("cgroup v1 %s: %w", dir, err)
	}
	return g, nil
}

// v1Dir is this process's cgroup in controller's cgroup v1 hierarchy.
func v1Dir(controller string) (string, error) {
	noV2 := "cgroup v2 does not offer it"
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%s; %w", noV2, err)
	}
	mount := cgroupMount(mi, "cgroup", controller)
	if mount == "" {
		return "", fmt.Errorf("%s, nor cgroup v1", noV2)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("%s; %w", noV2, err)
	}
	for line := range strings.Lines(string(self)) {
		// <id>:<controller>[,<controller>…]:<path>
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return filepath.Join(mount, f[2]), nil
		}
	}
	return "", fmt.Errorf("%s, and this process has no cgroup in %s", noV2, mount)
}

// cgroupMount returns the mount point of the first file system of type
// typ (cgroup2, or cgroup with controller among its super options) in a
// mountinfo file, or "".
func cgroupMount(mountinfo []byte, typ, controller string) string {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// <id> <parent> <maj:min> <root> <mount point> <options> [<tag>…] - <type> <source> <super options>
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, t := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(t) < 1 || t[0] != typ {
			continue
		}
		if controller == "" || len(t) >= 3 && slices.Contains(strings.Split(t[2], ","), controller) {
			return unescapeMount(f[4])
		}
	}
	return ""
}

// ProbeLimits says, for `conch doctor`, where this host could put each
// per-command limit: "pids: cgroup v1 /sys/fs/cgroup/pids/…" or
// "pids: unavailable (<cause>)", and the same for memory. It creates
// nothing.
func ProbeLimits() []string {
	cg := ProbeCgroup()
	var out []string
	for _, l := range limitSpecs(Options{}) {
		switch {
		case cg.Writable && offers(cg.Dir, l.controller):
			out = append(out, l.controller+": cgroup v2 "+cg.Dir)
			continue
		}
		dir, err := v1Dir(l.controller)
		if err == nil {
			if err = unix.Access(dir, unix.W_OK); err == nil {
				out = append(out, l.controller+": cgroup v1 "+dir)
				continue
			}
			err = fmt.Errorf("cgroup v1 %s: %w", dir, err)
		}
		out = append(out, l.controller+": unavailable ("+err.Error()+")")
	}
	return out
}
