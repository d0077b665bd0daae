//go:build !kube

package main

import (
	"fmt"
	"io"

	"github.com/conch-dev/conch/shell/remote"
)

// kubeExecutor refuses a Kubernetes host: this conch was built without
// the transport (the default: it adds 10 MB to the binary and 9 ms to
// every start of conch, its inits and agents; -tags kube puts it in).
func (c *config) kubeExecutor(name, engine, target string, stderr io.Writer, eo remote.Options) (*remote.Executor, error) {
	return nil, fmt.Errorf("host %s: this conch was built without the Kubernetes transport; build it with `go build -tags kube ./cmd/conch`", name)
}
