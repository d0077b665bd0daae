//go:build kube

package main

import (
	"fmt"
	"io"

	"github.com/conch-dev/conch/shell/remote"
	"github.com/conch-dev/conch/shell/remote/kube"
)

// kubeExecutor is the executor of the Kubernetes host called name, whose
// transport's flag value is target (spec.engine "kubernetes") or a
// template file ("pod_template").
func (c *config) kubeExecutor(name, engine, target string, stderr io.Writer, eo remote.Options) (*remote.Executor, error) {
	h := kube.Host{Name: name, Context: c.kube.context.by[name], Cwd: c.hostCwds.by[name]}
	if engine == "pod_template" {
		h.Template = target
	} else {
		var err error
		if h.Namespace, h.Pod, h.Container, err = kube.ParseTarget(target); err != nil {
			return nil, fmt.Errorf("host %s: kubernetes: %w", name, err)
		}
	}
	return kube.New(h, &kube.Options{AgentArgs: c.agentArgs(name), Stderr: stderr, Executor: eo})
}
