//go:build !kube

package main

import "fmt"

// The Kubernetes transport's keys, whose hosts this conch refuses: it
// was built without the transport (the default: it adds 10 MB to the
// binary and 9 ms to every start of conch, its inits and agents; -tags
// kube puts it in).
func init() {
	registerHostTransport(kubeTransport(func(h transportHost, _ hostOptions) (hostExecutor, error) {
		return nil, fmt.Errorf("host %s: this conch was built without the Kubernetes transport; build it with `go build -tags kube ./cmd/conch`", h.name)
	}))
}
