//go:build linux

// Package term runs a command on a pseudo-terminal and renders what it shows for a model.
//
// A program on a terminal does not print a transcript: it echoes what is
// typed, redraws lines with "\r", moves the cursor, switches to the
// alternate screen, and sometimes asks the terminal a question (where is
// the cursor?) and waits for the answer. So the output is fed through a
// terminal emulator (charmbracelet/x/vt), and a model reads the emulator's
// view, not the bytes: the screen while the program draws on it, else the
// lines it added since the last read. The raw bytes still go, unchanged, to
// Options.Raw (a spill file or a log).
//
// Three traps shape the code (each was met on this machine):
//   - creack/pty's ioctls leave the master in blocking mode, where a read
//     cannot be interrupted by Close: the master is duplicated, set
//     non-blocking and close-on-exec, and the original closed, so reads go
//     through Go's poller.
//   - The emulator answers a program's queries by writing into a pipe, and
//     its Write blocks until someone reads that pipe: a goroutine always
//     reads it and queues the bytes for the master (the same path carries
//     typed input, which the emulator encodes in the mode the program set).
//   - The end of a pty's output is EIO, not EOF.
package term

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
)

// The terminal a command gets.
const (
	Cols = 120
	Rows = 40
	// TermEnv is the TERM a command sees: what the emulator understands.
	TermEnv = "xterm-256color"
)

// QuietPeriod is how long output must pause for Input to consider the
// program done answering.
const QuietPeriod = 300 * time.Millisecond

// maxLogLines bounds the lines that scrolled off the screen and are kept
// for a line-mode read; older ones are dropped (and counted).
const maxLogLines = 2000

// readChunk is the largest piece of output fed to the emulator at once;
// the scrollback is drained after each, so it never holds more lines than
// one chunk can make.
const readChunk = 4 << 10

// Options configure Start.
type Options struct {
	// Raw, if set, receives every byte the program writes, unchanged, from
	// the pump goroutine (so it must not block for long). It is not
	// closed.
	Raw io.Writer
	// Grace is the wait between SIGTERM and SIGKILL when the terminal is
	// killed, and the bound on reading output after the program exited
	// while a process it started keeps the terminal open (default 3 s).
	Grace time.Duration
	// Open, if set, opens the pseudo-terminal (master and slave sides)
	// instead of this process's /dev/ptmx: a contained executor opens it
	// in the session's own devpts instance, where the program can name it
	// (docs/containment.md#what-a-command-sees-and-holds).
	Open func() (master, tty *os.File, err error)
}

// Spawn starts the program of a terminal with tty, the terminal's slave
// side, as its standard input, output and error, in a new session and
// process group (its pgid is its pid) whose controlling terminal tty
// becomes, with an environment made by Env. tty is the caller's: Spawn
// must not keep it open. Where the program runs (a child of this
// process, inside an init's namespaces) is the Spawn's choice: the local
// provider's spawn hook (docs/terminal.md).
type Spawn func(tty *os.File) (Process, error)

// Process is the program Spawn started. Term calls Wait once, Terminate
// at most once and only before Release, KillLeftovers at any time, and
// Release once, last, after Wait returned and a Terminate in flight
// finished; the local provider's Child has this shape.
type Process interface {
	// Wait waits for the program to exit and returns its wait status,
	// without releasing it: its process group id stays its own.
	Wait() (syscall.WaitStatus, error)
	// Terminate stops the program's process group: SIGTERM, SIGKILL if
	// anything of it is alive after grace.
	Terminate(grace time.Duration) (escalated bool, err error)
	// KillLeftovers kills what the program started that is still alive
	// outside its group or after its exit (an interactive shell's jobs,
	// each in a group of its own; a job left with nohup), and returns
	// once it is gone.
	KillLeftovers() error
	// Release lets the program go: its zombie is reaped.
	Release()
}

// Env is the environment of a terminal's program: env with
// TERM=xterm-256color, COLUMNS and LINES added, winning over any value in
// it.
func Env(env []string) []string {
	return append(env[:len(env):len(env)], "TERM="+TermEnv, fmt.Sprintf("COLUMNS=%d", Cols), fmt.Sprintf("LINES=%d", Rows))
}

// Term is a command running on a pseudo-terminal of Cols×Rows. Its
// methods are safe for concurrent use.
type Term struct {
	p     Process
	pty   *os.File
	emu   *vt.Emulator // guarded by mu: the emulator is not safe for concurrent use
	raw   io.Writer
	grace time.Duration

	in     *inputQueue
	done   chan struct{} // closed once the program exited and output ended
	pumped chan struct{} // closed when the output pump returned
	exited chan struct{} // closed once the program exited
	wg     sync.WaitGroup
	kill   sync.Once
	killed chan struct{} // closed when Kill's work is over

	mu        sync.Mutex
	releasing bool          // the program is about to be released: Terminate may no longer start
	terminate bool          // Kill terminates the group: the release waits for it
	changed   chan struct{} // closed and replaced on each output
	lastOut   time.Time
	written   int64 // output bytes so far
	readAt    int64 // written at the last Read
	moved     bool  // the program addressed the cursor since the last Read
	scan      cursorScanner
	log       []string // lines scrolled off the screen, oldest first
	logBase   int64    // absolute index of log[0]
	readLine  int64    // absolute index of the first line the next Read shows
	exitCode  *int
	signal    string
}

// Start opens a new pseudo-terminal of Cols×Rows and starts its program
// with spawn, whose error it returns as is.
func Start(spawn Spawn, opts *Options) (*Term, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Grace <= 0 {
		o.Grace = 3 * time.Second
	}
	open := o.Open
	if open == nil {
		open = pty.Open
	}
	master, tty, err := open()
	if err != nil {
		return nil, fmt.Errorf("term: open a pseudo-terminal: %w", err)
	}
	f, err := nonBlocking(master)
	if err == nil {
		err = pty.Setsize(tty, &pty.Winsize{Rows: Rows, Cols: Cols})
	}
	if err != nil {
		tty.Close()
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("term: start: %w", err)
	}
	p, err := spawn(tty)
	// The program holds the slave now: ours would keep its output from
	// ending (EIO) once the program and what it started are gone.
	tty.Close()
	if err != nil {
		f.Close()
		return nil, err
	}

	t := &Term{
		p:       p,
		pty:     f,
		emu:     vt.NewEmulator(Cols, Rows),
		raw:     o.Raw,
		grace:   o.Grace,
		done:    make(chan struct{}),
		pumped:  make(chan struct{}),
		killed:  make(chan struct{}),
		exited:  make(chan struct{}),
		changed: make(chan struct{}),
		lastOut: time.Now(),
	}
	t.in = newInputQueue(f)
	t.wg.Add(2)
	go t.replies()
	go t.in.run(&t.wg)
	go t.pump()
	go t.wait()
	return t, nil
}

// nonBlocking replaces master by a duplicate in non-blocking,
// close-on-exec mode, so that reads go through Go's poller and Close can
// interrupt them.
func nonBlocking(master *os.File) (*os.File, error) {
	defer master.Close()
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), master.Name()), nil
}

// Done is closed once the program has exited and its output has ended (or
// its drain was cut after Grace).
func (t *Term) Done() <-chan struct{} { return t.done }

// Exit reports how the program ended, once Done is closed: its exit code
// (nil when a signal ended it) and the signal's name ("SIGTERM", …).
func (t *Term) Exit() (code *int, signal string) {
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exitCode, t.signal
}

// Written reports how many bytes the program has written so far.
func (t *Term) Written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written
}

// pump feeds the program's output to Raw and to the emulator until the
// terminal's output ends (EIO once every holder of the slave closed it).
func (t *Term) pump() {
	defer close(t.pumped)
	buf := make([]byte, readChunk)
	for {
		n, err := t.pty.Read(buf)
		if n > 0 {
			t.output(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.drainQueued(buf)
		}
		if err != nil {
			return
		}
	}
}

// drainQueued reads, once the drain after the exit is cut, what the
// terminal already holds: bytes the program wrote before it exited,
// which a pump slowed down (a loaded machine, a slow emulator) had not
// reached. The kernel moves written bytes to the terminal's read queue
// (4 KiB) in the background as it is read, so the queue is looked at
// again after each read, until a look finds nothing more: a pty held
// about 14 KiB here, four looks' worth, and four looks at most cut the
// last 2 KiB once in CI, where one look came too early. A process left
// holding the terminal that goes on writing keeps each look busy: the
// looks end after drainBudget bytes or drainTime, which such a writer
// adds to the end.
func (t *Term) drainQueued(buf []byte) {
	rc, err := t.pty.SyscallConn()
	if err != nil {
		return
	}
	end := time.Now().Add(drainTime)
	for total := 0; total < drainBudget && time.Now().Before(end); {
		queued := 0
		rc.Control(func(fd uintptr) { queued, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		if err != nil {
			return
		}
		// Nothing queued: one short read lets the kernel move what it
		// still holds (a read of the terminal does), else ends.
		want, wait := queued, end
		if queued <= 0 {
			want = len(buf)
			if short := time.Now().Add(20 * time.Millisecond); short.Before(end) {
				wait = short
			}
		}
		t.pty.SetReadDeadline(wait)
		got := 0
		for want > 0 {
			n, err := t.pty.Read(buf[:min(len(buf), want)])
			if n > 0 {
				t.output(buf[:n])
				want -= n
				got += n
			}
			if err != nil {
				return
			}
			if queued <= 0 {
				break
			}
		}
		if got == 0 {
			return
		}
		total += got
	}
}

// drainBudget bounds what drainQueued reads: several times what a pty
// held at its program's exit here (about 14 KiB, its read queue
// included).
const drainBudget = 64 << 10

// drainTime bounds how long drainQueued reads: its looks at what is
// already there take a few milliseconds, even on a loaded machine.
const drainTime = 200 * time.Millisecond

// output handles one chunk of program output.
func (t *Term) output(b []byte) {
	if t.raw != nil {
		t.raw.Write(b)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// The emulator may write a reply while parsing: the replies goroutine
	// takes it, so this never waits for the program.
	t.emu.Write(b)
	if t.scan.scan(b) {
		t.moved = true
	}
	t.drainScrollback()
	t.written += int64(len(b))
	t.lastOut = time.Now()
	close(t.changed)
	t.changed = make(chan struct{})
}

// drainScrollback moves the lines that scrolled off the screen into the
// log, so that the emulator's scrollback never fills (and never drops a
// line unseen).
func (t *Term) drainScrollback() {
	sb := t.emu.Scrollback()
	if sb.Len() == 0 {
		return
	}
	for _, l := range sb.Lines() {
		t.log = append(t.log, trimLine(l.String()))
	}
	sb.Clear()
	if over := len(t.log) - maxLogLines; over > 0 {
		t.log = append(t.log[:0], t.log[over:]...)
		t.logBase += int64(over)
	}
}

// replies forwards what the emulator writes (answers to the program's
// queries, encoded input) to the program.
func (t *Term) replies() {
	defer t.wg.Done()
	buf := make([]byte, 1024)
	for {
		n, err := t.emu.Read(buf)
		if n > 0 {
			t.in.push(buf[:n])
		}
		if err != nil {
			t.in.close()
			return
		}
	}
}

// wait follows the program to its end: its exit, the drain of its
// output, then any group kill in flight, and only then the release, so
// that no kill signals the group after its leader's pid was freed.
func (t *Term) wait() {
	ws, err := t.p.Wait()
	t.mu.Lock()
	switch {
	case err != nil: // the spawner lost it (its init ended): no status
		code := -1
		t.exitCode = &code
	case ws.Signaled():
		t.signal = proc.SignalName(ws.Signal())
	default:
		code := ws.ExitStatus()
		t.exitCode = &code
	}
	t.mu.Unlock()
	close(t.exited)
	// Output written just before the exit is still in the terminal; a
	// process the program left behind may hold it open: read until EIO,
	// at most Grace more.
	t.pty.SetReadDeadline(time.Now().Add(t.grace))
	<-t.pumped
	// Closing the emulator's pipe ends the replies goroutine, which
	// closes the input queue; a write the program never took is cut.
	t.emu.InputPipe().(*io.PipeWriter).CloseWithError(io.EOF)
	t.pty.SetWriteDeadline(time.Now())
	t.wg.Wait()
	t.pty.Close()
	t.mu.Lock()
	t.releasing = true
	terminating := t.terminate
	close(t.changed)
	t.changed = nil
	t.mu.Unlock()
	if terminating {
		<-t.killed
	}
	t.p.Release()
	close(t.done)
}

// Kill stops the program and every process of its session (an
// interactive shell puts each job in a group of its own): SIGTERM to its
// group, SIGKILL after Grace, then what it started outside the group.
// After the program's release only the latter remains to do. It returns
// at once; Done tells when the program is over. Only the first call
// signals.
func (t *Term) Kill() {
	t.kill.Do(func() {
		t.mu.Lock()
		group := !t.releasing
		t.terminate = group
		t.mu.Unlock()
		go func() {
			defer close(t.killed)
			if group {
				t.p.Terminate(t.grace)
			}
			t.p.KillLeftovers()
		}()
	})
}

// Close kills the program as Kill does (what it left running, once it
// was released, as far as the Process's KillLeftovers reaches), and waits
// until the kill is over and the terminal is released.
func (t *Term) Close() {
	t.Kill()
	<-t.done
	<-t.killed
}

// Type sends text to the program as if typed (newlines included).
func (t *Term) Type(text string) {
	if text != "" {
		t.mu.Lock()
		t.emu.SendText(text)
		t.mu.Unlock()
	}
}

// Press sends the keys named, in order (see ParseKeys); nothing is sent
// when a name is unknown.
func (t *Term) Press(names ...string) error {
	keys, err := ParseKeys(names)
	if err != nil {
		return err
	}
	t.send(keys)
	return nil
}

// Input types text, presses keys, then waits up to wait for the program to
// answer: it returns early once output has been quiet for QuietPeriod (or
// once the program has ended). Keys are checked before anything is sent.
// It returns Read's view.
func (t *Term) Input(text string, keys []string, wait time.Duration) (string, error) {
	parsed, err := ParseKeys(keys)
	if err != nil {
		return "", err
	}
	select {
	case <-t.exited:
		return "", ErrEnded
	default:
	}
	t.mu.Lock()
	t.lastOut = time.Now() // quiet is measured from the input on
	t.mu.Unlock()
	t.Type(text)
	t.send(parsed)
	t.WaitQuiet(wait)
	return t.Read(), nil
}

// send presses keys, encoded in the mode the program set (application
// cursor keys or not).
func (t *Term) send(keys []vt.KeyPressEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		t.emu.SendKey(k)
	}
}

// ErrEnded is returned by Input when the program has already exited.
var ErrEnded = errors.New("term: the program has ended")

// WaitQuiet waits until output has been quiet for QuietPeriod, the
// program has ended, or max has passed.
func (t *Term) WaitQuiet(max time.Duration) {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	for {
		t.mu.Lock()
		changed, last := t.changed, t.lastOut
		t.mu.Unlock()
		if changed == nil {
			return // ended
		}
		quietFor := time.Since(last)
		if quietFor >= QuietPeriod {
			return
		}
		q := time.NewTimer(QuietPeriod - quietFor)
		select {
		case <-deadline.C:
			q.Stop()
			return
		case <-t.exited:
			q.Stop()
			// The last output may still be on its way: let the drain end.
			select {
			case <-t.done:
			case <-deadline.C:
			}
			return
		case <-changed:
		case <-q.C:
		}
		q.Stop()
	}
}

// Screen is the current screen as text: each line without its trailing
// blanks, trailing blank lines removed.
func (t *Term) Screen() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines, _ := t.screenLines()
	return strings.Join(trimTrailingBlank(lines), "\n")
}

// Peek is the end of the screen as Screen gives it, without touching what
// the next Read returns: at most maxBytes bytes, starting at a line when
// one starts within them. It feeds a notice's "last output".
func (t *Term) Peek(maxBytes int) string {
	s := t.Screen()
	if len(s) <= maxBytes {
		return s
	}
	s = s[len(s)-maxBytes:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// AltScreen reports whether the program is on the alternate screen.
func (t *Term) AltScreen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.emu.IsAltScreen()
}

// screenLines returns the screen's rows as text, each without trailing
// blanks, and the cursor's row. t.mu must be held.
func (t *Term) screenLines() ([]string, int) {
	return strings.Split(t.emu.String(), "\n"), t.emu.CursorPosition().Y
}

// Read is what a model sees of the terminal since the previous Read:
//   - while the program is on the alternate screen, or addressed the
//     cursor (moved it up, to a row, or cleared the screen) since the
//     previous Read, the whole screen (Screen);
//   - otherwise the lines it added: those that scrolled off the screen
//     and the screen's lines up to the cursor's, the cursor's line
//     included without a newline when it holds text (a prompt). That line
//     is shown again by the next Read if more output came, since it may
//     have been completed.
//
// Nothing new gives "". The text never holds escape sequences, and a line
// redrawn with "\r" shows its last state only. Lines that scrolled away
// before a Read (more than 2000 of them) are counted in a line
// "[… N lines scrolled away]".
func (t *Term) Read() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.written == t.readAt {
		return ""
	}
	t.readAt = t.written
	lines, row := t.screenLines()
	screenBase := t.logBase + int64(len(t.log))
	if t.emu.IsAltScreen() {
		// Leaving the alternate screen restores the main one and its
		// cursor: line reads go on from where they were.
		t.moved = false
		return strings.Join(trimTrailingBlank(lines), "\n")
	}
	if t.moved {
		t.moved = false
		t.readLine = screenBase + int64(row)
		return strings.Join(trimTrailingBlank(lines), "\n")
	}
	var b strings.Builder
	from := t.readLine
	if from < t.logBase {
		b.WriteString(ScrolledAway(t.logBase-from) + "\n")
		from = t.logBase
	}
	for i := from; i < screenBase; i++ {
		b.WriteString(t.log[i-t.logBase])
		b.WriteByte('\n')
	}
	for r := max(from-screenBase, 0); r < int64(row) && r < int64(len(lines)); r++ {
		b.WriteString(lines[r])
		b.WriteByte('\n')
	}
	if row < len(lines) {
		b.WriteString(t.cursorLine(lines[row]))
	}
	t.readLine = screenBase + int64(row)
	return b.String()
}

// cursorLine is the cursor's line as the program left it: with the blanks
// up to the cursor that trimming removed, so that a prompt keeps its
// trailing space ("> "). t.mu must be held.
func (t *Term) cursorLine(line string) string {
	if pad := t.emu.CursorPosition().X - utf8.RuneCountInString(line); pad > 0 {
		return line + strings.Repeat(" ", pad)
	}
	return line
}

func trimLine(s string) string { return strings.TrimRight(s, " ") }

func trimTrailingBlank(lines []string) []string {
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
