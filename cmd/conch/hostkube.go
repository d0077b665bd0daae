package main

import "fmt"

// Kubernetes hosts (docs/remote.md#kubernetes): `kubernetes =
// "<namespace>/<pod>[/<container>]"`, a running pod reached through the
// API server's pods/exec, or `pod_template = "<file>"`, a pod for each
// session made from the file on its first command and deleted at its
// end; `context` picks
// the kubeconfig's context. Flags: --host-kubernetes NAME=NS/POD[/C],
// --host-pod-template NAME=FILE, --host-context NAME=CONTEXT. The
// transport (client-go's kubeconfig loader, REST client and
// remotecommand) adds about 10 MB and 9 ms of package initialisation to
// every start of conch, its inits and agents: it is built in with
// `-tags kube` (hostkube_kube.go); the default build registers the same
// keys with a constructor that refuses these hosts
// (hostkube_default.go), so that a configuration means the same to
// both.

// kubeTransport is the record of the Kubernetes transport, whose hosts
// newKube builds.
func kubeTransport(newKube func(transportHost, hostOptions) (hostExecutor, error)) *hostTransport {
	return &hostTransport{
		targets: []hostKey{
			{key: "kubernetes", flag: "host-kubernetes", what: "namespace/pod",
				usage: "a running Kubernetes pod commands may run on, `NAME=NAMESPACE/POD[/CONTAINER]` (through the API server's pods/exec; repeatable)"},
			{key: "pod_template", flag: "host-pod-template", what: "file",
				usage: "a Kubernetes pod made from a manifest on a host's first command and deleted at the end, `NAME=FILE` (repeatable)"},
		},
		extras: []hostKey{{key: "context", flag: "host-context", what: "context",
			usage: "the kubeconfig context of a Kubernetes host, `NAME=CONTEXT` (default: the current context; repeatable)"}},
		check: func(hosts hostsByKey) error {
			for name := range hosts["context"] {
				if hosts["kubernetes"][name] == "" && hosts["pod_template"][name] == "" {
					return fmt.Errorf("--host-context %s: no Kubernetes host %s is configured", name, name)
				}
			}
			return nil
		},
		describe: func(h transportHost) string {
			if h.key == "pod_template" {
				return "kubernetes pod template " + h.target
			}
			return "kubernetes pod " + h.target
		},
		new: newKube,
	}
}
