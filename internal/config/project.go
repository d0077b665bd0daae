package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ProjectFile is a project's own configuration file, relative to a
// session's working directory. It may only narrow what the user's file
// allows (see ProjectRules).
const ProjectFile = ".conch/config.toml"

// LoadProject reads dir's ProjectFile; no file (nor a .conch directory)
// is no error: no entries.
// The file is opened inside dir: a symbolic link on the way may point
// elsewhere inside dir, but one that leads out of it is refused, so that
// a project cannot make conch read a file elsewhere (a key of the user's
// secrets named in an error message, say). Like Load, it reads a regular
// file only, at most MaxFileBytes, without blocking on a FIFO. Errors
// name the file by its absolute path.
func LoadProject(dir string) ([]Entry, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	path := filepath.Join(dir, ProjectFile)
	data, err := readProject(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	return Parse(path, data)
}

func readProject(dir string) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer root.Close()
	f, err := root.OpenFile(ProjectFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	return readOpen(f)
}
