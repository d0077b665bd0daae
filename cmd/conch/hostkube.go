package main

import (
	"flag"
	"fmt"
	"slices"
)

// Kubernetes hosts (docs/remote.md#kubernetes): `kubernetes =
// "<namespace>/<pod>[/<container>]"`, a running pod reached through the
// API server's pods/exec, or `pod_template = "<file>"`, a pod made from
// the file on the first command and deleted at the end; `context` picks
// the kubeconfig's context. Flags: --host-kubernetes NAME=NS/POD[/C],
// --host-pod-template NAME=FILE, --host-context NAME=CONTEXT. The
// transport (client-go's kubeconfig loader, REST client and
// remotecommand) adds about 10 MB and 9 ms of package initialisation to
// every start of conch, its inits and agents: it is built in with
// `-tags kube` (hostkube_kube.go); the default build refuses these hosts
// (hostkube_default.go).
type kubeHosts struct{ target, template, context hostValues }

// kubeFields are the host table's keys of Kubernetes hosts and their
// flags.
var kubeFields = map[string]string{"kubernetes": "host-kubernetes", "pod_template": "host-pod-template", "context": "host-context"}

func init() {
	for k, f := range kubeFields {
		hostFields[k] = f
	}
	hostFieldNames = append(hostFieldNames, "kubernetes", "pod_template", "context")
	notKeys = append(notKeys, "host-kubernetes", "host-pod-template", "host-context")
}

// addKubeFlags registers the flags of Kubernetes hosts, and makes every
// transport's flag a peer of the others: a host has one.
func (c *config) addKubeFlags(fs *flag.FlagSet) {
	c.kube.target = hostValues{what: "namespace/pod"}
	c.kube.template = hostValues{what: "file"}
	c.kube.context = hostValues{what: "context"}
	all := []*hostValues{&c.hosts, &c.hostPodman, &c.hostDocker, &c.hostImage, &c.kube.target, &c.kube.template}
	for _, v := range all {
		v.peers = slices.DeleteFunc(slices.Clone(all), func(p *hostValues) bool { return p == v })
	}
	fs.Var(&c.kube.target, "host-kubernetes", "a running Kubernetes pod commands may run on, `NAME=NAMESPACE/POD[/CONTAINER]` (through the API server's pods/exec; repeatable)")
	fs.Var(&c.kube.template, "host-pod-template", "a Kubernetes pod made from a manifest on a host's first command and deleted at the end, `NAME=FILE` (repeatable)")
	fs.Var(&c.kube.context, "host-context", "the kubeconfig context of a Kubernetes host, `NAME=CONTEXT` (default: the current context; repeatable)")
}

// kubeTransport is conch doctor's words for a Kubernetes host, or "".
func (c *config) kubeTransport(name string) string {
	if v := c.kube.target.by[name]; v != "" {
		return "kubernetes pod " + v
	}
	if v := c.kube.template.by[name]; v != "" {
		return "kubernetes pod template " + v
	}
	return ""
}

// checkKubeContexts refuses a context given for a host that is not a
// Kubernetes host.
func (c *config) checkKubeContexts() error {
	for name := range c.kube.context.by {
		if c.kube.target.by[name] == "" && c.kube.template.by[name] == "" {
			return fmt.Errorf("--host-context %s: no Kubernetes host %s is configured", name, name)
		}
	}
	return nil
}
