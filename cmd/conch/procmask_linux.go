//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// withContainerHint adds to err, an init's failure to start, what keeps a
// container from giving it and which option of the container's engine
// would (docs/remote.md#containers): a masked /proc (paths under it
// covered by other mounts, the default of podman, docker and Kubernetes)
// makes the kernel refuse a fresh procfs mount, and docker's default
// seccomp profile refuses new user namespaces outright. Any other error,
// or one outside such a container, is left as it is.
func withContainerHint(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "mount /proc"):
		if procMasked() {
			return fmt.Errorf("%w (/proc is masked in this container; %s)", err, engineHow())
		}
	case strings.Contains(msg, "operation not permitted"):
		if procMasked() {
			return fmt.Errorf("%w (this container refuses user namespaces and masks /proc; %s)", err, engineHow())
		}
	}
	return err
}

// procMasked reports whether another mount covers a path under /proc
// (binfmt_misc, which hosts mount there, aside).
func procMasked() bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], "/proc/") && fields[4] != "/proc/sys/fs/binfmt_misc" {
			return true
		}
	}
	return false
}

// How each engine lets a container's processes mount a fresh /proc in
// new user namespaces (checked on podman 4.3, docker 20.10 and Kubernetes
// 1.37).
const (
	unmaskPodman     = "podman unmasks it with --security-opt unmask=/proc/*"
	unmaskDocker     = "docker with --security-opt systempaths=unconfined and a seccomp profile that allows user namespaces"
	unmaskKubernetes = "Kubernetes with a privileged container (securityContext.privileged: true)"
)

// engineHow is the option of this container's engine (podman leaves
// /run/.containerenv, docker /.dockerenv, Kubernetes its service's
// variables), or of each when it cannot tell.
func engineHow() string {
	switch {
	case exists("/run/.containerenv"):
		return unmaskPodman
	case exists("/.dockerenv"):
		return unmaskDocker
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		return unmaskKubernetes
	}
	return strings.Join([]string{unmaskPodman, unmaskDocker, unmaskKubernetes}, ", ")
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
