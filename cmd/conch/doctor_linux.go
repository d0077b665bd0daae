//go:build linux

package main

import (
	"fmt"
	"strings"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
)

// hostLines are conch doctor's findings about the kernel: what
// containment and the sandbox could use, and what commands get with c,
// found by building c's executor as conch serve would (an init started,
// then ended). ok is false when c requires containment or a sandbox this
// host cannot enforce.
func hostLines(c *config) (lines [][2]string, enf enforcement, ok bool) {
	ns, sb := nsinit.Probe(), sandbox.Probe()
	cg := "not mounted"
	if ns.Cgroup.Mount != "" {
		w := "not writable"
		if ns.Cgroup.Writable {
			w = "writable"
		}
		cg = fmt.Sprintf("%s (%s)", ns.Cgroup.Dir, w)
	}
	ll := fmt.Sprintf("ABI %d", sb.LandlockABI)
	if sb.LandlockErr != nil {
		ll = "none (" + sb.LandlockErr.Error() + ")"
	}
	enf, ok = enforcementOf(c)
	if enf.containment == "none (off)" {
		enf.containment = "none (off; this host would allow: " + ns.Summary() + ")"
	}
	return [][2]string{
		{"user namespaces", yesOr(ns.UserNS)},
		{"pid namespaces", yesOr(ns.PIDNS)},
		{"cgroup v2", cg},
		{"cgroup limits", strings.Join(nsinit.ProbeLimits(), "; ")},
		{"landlock", ll},
		{"seccomp", yesNo(sb.Seccomp)},
		{"containment", enf.containment},
		{"sandbox", enf.sandbox},
		{"network", enf.network},
		{"cache layer", cacheLine(enf)},
	}, enf, ok
}

func yesOr(err error) string {
	if err != nil {
		return "no (" + err.Error() + ")"
	}
	return "yes"
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// cacheLine is the cache layer line: how the sandbox's commands get
// their caches, and where conch keeps what they wrote.
func cacheLine(enf enforcement) string {
	if enf.cacheLayer == "" {
		return "none (no sandbox)"
	}
	return enf.cacheLayer
}
