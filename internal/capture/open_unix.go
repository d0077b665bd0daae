//go:build unix

package capture

import (
	"errors"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

// isLoop reports the error O_NOFOLLOW gives on a symlink on systems that
// check it before O_EXCL; the name is taken either way.
func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
