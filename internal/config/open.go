package config

import (
	"io"
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without blocking on a FIFO (the
// caller refuses anything that is not a regular file once it is open).
// Symbolic links are followed: a user may keep the file in a dotfiles
// repository.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readFull reads into buf until it is full or the file ends.
func readFull(f *os.File, buf []byte) (int, error) {
	n, err := io.ReadFull(f, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return n, err
}
