package shell

import "errors"

// FileSystem is implemented by executors that can answer, for the host
// they run commands on, what the layers above would otherwise ask of the
// server's own file system: a remote provider answers for its host, and
// an executor that is not a FileSystem leaves the questions to its runs
// (a workdir is checked when a command starts in it).
type FileSystem interface {
	// Dir returns the real path (symbolic links resolved) of path, an
	// absolute path of the host, when it names an existing directory.
	// Otherwise the error wraps fs.ErrNotExist (nothing is there),
	// ErrNotDir (something that is not a directory is), or another
	// cause.
	Dir(path string) (string, error)
	// Home returns the home directory of the user the host runs
	// commands as.
	Home() (string, error)
}

// ErrNotDir is wrapped by FileSystem.Dir's error for a path that exists
// and is not a directory. Its text is that of ENOTDIR.
var ErrNotDir = errors.New("not a directory")
