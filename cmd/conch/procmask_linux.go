//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// withProcMaskHint adds procMaskHint to err, an init's failure to start,
// when it could not mount its /proc.
func withProcMaskHint(err error) error {
	if !strings.Contains(err.Error(), "mount /proc") {
		return err
	}
	if hint := procMaskHint(); hint != "" {
		return fmt.Errorf("%w (%s)", err, hint)
	}
	return err
}

// procMaskHint says, when this process runs in a container whose engine
// masked /proc (paths under it covered by other mounts, the default of
// podman, docker and Kubernetes), which option of that engine unmasks it:
// the kernel refuses a fresh procfs mount, and so an init of its own,
// while any of /proc is covered (docs/remote.md#containers). It is "" when
// nothing under /proc but binfmt_misc is covered.
func procMaskHint() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	masked := false
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], "/proc/") && fields[4] != "/proc/sys/fs/binfmt_misc" {
			masked = true
			break
		}
	}
	if !masked {
		return ""
	}
	how := []string{unmaskPodman, unmaskDocker, unmaskKubernetes}
	switch {
	case exists("/run/.containerenv"):
		how = how[:1]
	case exists("/.dockerenv"):
		how = how[1:2]
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		how = how[2:]
	}
	return "/proc is masked in this container; " + strings.Join(how, ", ")
}

// How each engine unmasks /proc (checked on podman 4.3, docker 20.10 and
// Kubernetes 1.37: docs/remote.md#containers).
const (
	unmaskPodman     = "podman unmasks it with --security-opt unmask=/proc/*"
	unmaskDocker     = "docker with --security-opt systempaths=unconfined and a seccomp profile that allows user namespaces"
	unmaskKubernetes = "Kubernetes with a privileged container (securityContext.privileged: true)"
)

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
