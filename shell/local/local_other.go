//go:build !linux

package local

import (
	"errors"

	"github.com/conch-dev/conch/shell"
)

// Executor is the local provider. It needs Linux (a child subreaper,
// pidfds, /proc); on other systems New refuses, so no Executor exists and
// its methods, those of shell.Executor, are never called.
type Executor struct{ shell.Executor }

// New reports that the local provider needs Linux.
func New(opts *Options) (*Executor, error) {
	return nil, errors.New("conch's local provider needs Linux")
}

// Options is never called: New returns no Executor here.
func (*Executor) Options() Options { return Options{} }

// Scrubbed is never called: New returns no Executor here.
func (*Executor) Scrubbed() []string { return nil }
