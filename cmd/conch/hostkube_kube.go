//go:build kube

package main

import (
	"fmt"

	"github.com/conch-dev/conch/shell/remote/kube"
)

// The Kubernetes transport: a host's target is a running pod
// ("kubernetes", namespace/pod[/container]) or a template file
// ("pod_template": a pod for each session, kube.Template); "context"
// picks the kubeconfig's context.
func init() {
	registerHostTransport(kubeTransport(func(h transportHost, o hostOptions) (hostExecutor, error) {
		kh := kube.Host{Name: h.name, Context: h.extra["context"], Cwd: h.cwd}
		ko := &kube.Options{AgentArgs: o.agentArgs, Stderr: o.stderr, Executor: o.executor}
		if h.key == "pod_template" {
			kh.Template = h.target
			return asHost(kube.NewTemplate(kh, ko))
		}
		var err error
		if kh.Namespace, kh.Pod, kh.Container, err = kube.ParseTarget(h.target); err != nil {
			return nil, fmt.Errorf("host %s: kubernetes: %w", h.name, err)
		}
		return asHost(kube.New(kh, ko))
	}))
}
