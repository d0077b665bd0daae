//go:build linux

package local

import (
	"os"
	"path/filepath"

	"github.com/conch-dev/conch/shell"
)

var _ shell.FileSystem = (*Executor)(nil)

// Dir implements shell.FileSystem: commands run on this machine.
func (e *Executor) Dir(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &os.PathError{Op: "stat", Path: path, Err: shell.ErrNotDir}
	}
	return filepath.EvalSymlinks(path)
}

// Home implements shell.FileSystem: the home of the user this process
// runs as, which its commands run as too.
func (e *Executor) Home() (string, error) { return os.UserHomeDir() }
