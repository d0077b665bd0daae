//go:build nokube

package main

import (
	"fmt"
	"io"

	"github.com/conch-dev/conch/shell/remote"
)

// kubeExecutor refuses a Kubernetes host: this conch was built without
// the transport (-tags nokube).
func (c *config) kubeExecutor(name, engine, target string, stderr io.Writer, eo remote.Options) (*remote.Executor, error) {
	return nil, fmt.Errorf("host %s: this conch was built without Kubernetes (-tags nokube); build it without that tag", name)
}
