package proc

import "os"

// Command is a program to start: what every spawner of conch needs, the
// local provider's own (shell/local) and a session's init
// (internal/nsinit) alike. The local provider's Command adds whose it is
// and the sandbox it asks for.
type Command struct {
	// Path is the executable (absolute, or relative to Dir); Args its
	// arguments, Args[0] included.
	Path string
	Args []string
	// Env is the whole environment; Dir the working directory.
	Env []string
	Dir string
	// Stdin, Stdout and Stderr become descriptors 0, 1 and 2; nil means
	// /dev/null. The spawner may close them once it returns.
	Stdin, Stdout, Stderr *os.File
	// Terminal says that Stdin is the slave side of a pseudo-terminal
	// (Stdout and Stderr too): it becomes the controlling terminal of the
	// command's new session (setsid, then TIOCSCTTY in the child), so
	// that C-c reaches the foreground job (docs/terminal.md).
	Terminal bool
}
