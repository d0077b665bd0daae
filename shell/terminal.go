package shell

import "time"

// Terminals is implemented by executors that can run a command on a
// pseudo-terminal, for a program that needs one: a prompt, a REPL, a
// full-screen program. It is optional; the tool layer offers `tty` only
// for executors that implement it.
type Terminals interface {
	// StartTerminal starts `bash -c s.Command` on a new pseudo-terminal of
	// 120×40 with TERM=xterm-256color, the terminal as its standard input,
	// output and error, in s.Workdir, with the environment of a command
	// of this executor and s.Owner as its owner (OwnerEnder and Close end
	// what it leaves running). s.Stdin and s.Timeout do not apply: the
	// caller types, and kills. Errors are those of Start (a *WorkdirError,
	// a *SpawnError, ErrClosed).
	StartTerminal(s Spec) (Terminal, error)
}

// Terminal is a command running on a pseudo-terminal, seen through a
// terminal emulator. Its methods are safe for concurrent use.
type Terminal interface {
	// Read returns what the terminal shows since the previous Read, as
	// plain text without escape sequences: the whole screen while the
	// program draws on it (the alternate screen, cursor addressing), else
	// the lines it added, the cursor's line (a prompt) last. Nothing new
	// gives "".
	Read() string
	// Peek returns the end of the screen, at most maxBytes bytes, without
	// touching what the next Read returns.
	Peek(maxBytes int) string
	// Written reports how many bytes the program has written so far.
	Written() int64
	// Input types text, then presses keys (names such as "Enter", "C-c",
	// "F1"), then waits up to wait for the program's answer, returning
	// early once its output has been quiet for a short period or it
	// ended. It returns what Read would. It fails, sending nothing, when
	// a key name is unknown or the program has already exited.
	Input(text string, keys []string, wait time.Duration) (string, error)
	// Kill stops the program and everything in its session (SIGTERM,
	// SIGKILL after the executor's grace) and returns at once.
	Kill()
	// Done is closed once the program has exited, its output has been
	// read (or its drain cut after the grace) and the terminal released.
	Done() <-chan struct{}
	// Exit reports how the program ended, once Done is closed: its exit
	// code (nil when a signal ended it) and the signal's name.
	Exit() (code *int, signal string)
	// Raw reports the raw stream, every byte the program wrote, escape
	// sequences included, as a captured stream: its size, lines, head and
	// tail, and, once the stream outgrew the executor's tail, the spill
	// file holding all of it (or why there is none), as for a command's
	// stdout. Before Done is closed, that file is still being written and
	// holds the stream so far.
	Raw() Output
}

// TerminalFindings is implemented by a Terminal whose provider has
// findings of its own about the program once Done is closed: the markers
// of what its sandbox denied the program and the processes it started,
// and the sandbox report, as a piped command's Result carries them in
// Notes and Sandbox (docs/sandbox.md#the-denial-record). Before Done
// both are nil.
type TerminalFindings interface {
	Findings() (notes []string, sandbox *SandboxReport)
}
