//go:build linux

package nsinit

import "testing"

// TestCgroup2Mount: the cgroup v2 mount is found by its type, whatever
// its place (a hybrid hierarchy puts it under /sys/fs/cgroup/unified),
// with mountinfo's octal escapes undone.
func TestCgroupMount(t *testing.T) {
	for _, c := range []struct{ name, mountinfo, want string }{
		{"hybrid", `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`, "/sys/fs/cgroup/unified"},
		{"unified", `24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
`, "/sys/fs/cgroup"},
		{"escaped", `41 31 0:38 / /mnt/my\040cgroups rw - cgroup2 none rw
`, "/mnt/my cgroups"},
		{"v1 only", `35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`, ""},
		{"a cgroup2 path on another type", `50 1 0:40 / /cgroup2 rw - tmpfs cgroup2 rw
`, ""},
	} {
		if got := cgroupMount([]byte(c.mountinfo), "cgroup2", ""); got != c.want {
			t.Errorf("%s: cgroupMount = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCgroupV1Mount: a controller's cgroup v1 hierarchy is found by the
// controller among its super options, a joint hierarchy included.
func TestCgroupV1Mount(t *testing.T) {
	const mountinfo = `41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
37 31 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
`
	for controller, want := range map[string]string{"memory": "/sys/fs/cgroup/memory", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "pids": "/sys/fs/cgroup/pids", "hugetlb": ""} {
		if got := cgroupMount([]byte(mountinfo), "cgroup", controller); got != want {
			t.Errorf("%s: cgroupMount = %q, want %q", controller, got, want)
		}
	}
}
