//go:build linux

package term_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/internal/testutil"
)

// spawn starts argv with env (term.Env added) as a child of the test
// binary on the terminal, in a new session whose controlling terminal it
// is: what the local provider's default spawner does for a terminal
// (shell/local), which this package's tests cannot import.
func spawn(argv, env []string) term.Spawn {
	return func(tty *os.File) (term.Process, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = term.Env(env)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
		if err := proc.StartCmd(cmd); err != nil {
			return nil, err
		}
		c := &child{cmd: cmd, tracker: proc.NewTracker()}
		c.tracker.Add(cmd.Process.Pid, "")
		return c, nil
	}
}

// child is a program spawn started; its session is tracked so that
// KillLeftovers takes every process of it.
type child struct {
	cmd     *exec.Cmd
	tracker *proc.Tracker
}

func (c *child) Wait() (syscall.WaitStatus, error) {
	ws, err := proc.WaitExited(c.cmd.Process.Pid)
	c.tracker.Exited(c.cmd.Process.Pid)
	return ws, err
}

func (c *child) Terminate(grace time.Duration) (bool, error) {
	return proc.Terminate(c.cmd.Process.Pid, grace), nil
}

func (c *child) KillLeftovers() error {
	c.tracker.KillSession(c.cmd.Process.Pid, time.Second)
	return nil
}

func (c *child) Release() { proc.WaitCmd(c.cmd) }

// helperEnv names the helper program the test binary runs as.
const helperEnv = "TERMTEST_HELPER"

// TestMain runs a helper program when asked; otherwise it makes the test
// binary a child subreaper (as conch is) and fails the run if a goroutine
// leaked.
func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		helpers[name]()
		os.Exit(0)
	}
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testutil.VerifyTestMain(m)
}

var helpers = map[string]func(){
	// repl: a line REPL with a "> " prompt; "quit" or end of input ends it.
	"repl": func() {
		fmt.Print("> ")
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "quit" {
				break
			}
			fmt.Printf("= %s\n> ", strings.ToUpper(sc.Text()))
		}
		fmt.Println("bye")
	},
	// password: reads a line with echo off, as read -s does.
	"password": func() {
		fmt.Print("Password: ")
		old := setMode(func(t *unix.Termios) { t.Lflag &^= unix.ECHO })
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		restore(old)
		fmt.Printf("\ngot %d characters\n", len(strings.TrimSuffix(line, "\n")))
	},
	// fullscreen: draws on the alternate screen with cursor addressing,
	// waits for Enter, then leaves it.
	"fullscreen": func() {
		fmt.Print("\x1b[?1049h\x1b[2J\x1b[1;1HTITLE\x1b[20;50Hcenter\x1b[40;1Hstatus: ready\x1b[1;6H")
		bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Print("\x1b[?1049lleft full screen\n")
	},
	// cpr: asks the terminal where the cursor is and prints the answer.
	"cpr": func() {
		old := setMode(func(t *unix.Termios) { t.Lflag &^= unix.ICANON | unix.ECHO })
		fmt.Print("abc\x1b[6n")
		var resp []byte
		b := make([]byte, 1)
		for {
			if n, err := os.Stdin.Read(b); n == 0 || err != nil {
				break
			}
			resp = append(resp, b[0])
			if b[0] == 'R' {
				break
			}
		}
		restore(old)
		fmt.Printf("\ncursor at %s\n", strings.TrimPrefix(string(resp), "\x1b["))
	},
	// progress: a progress bar redrawn with "\r".
	"progress": func() {
		for i := 0; i <= 100; i += 10 {
			fmt.Printf("\rprogress %3d%%", i)
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Print("\ndone\n")
	},
	// keys: prints, in hex, each chunk of input it reads in raw mode, until
	// it reads "q".
	"keys": func() {
		old := setMode(func(t *unix.Termios) {
			t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG
			t.Iflag &^= unix.ICRNL | unix.IXON
		})
		defer restore(old)
		fmt.Print("ready\r\n")
		b := make([]byte, 64)
		for {
			n, err := os.Stdin.Read(b)
			if err != nil || n == 0 {
				return
			}
			if string(b[:n]) == "q" {
				return
			}
			fmt.Printf("%x\r\n", b[:n])
		}
	},
	// flood: writes TERMTEST_FLOOD_BYTES bytes of 100-byte lines.
	"flood": func() {
		line := strings.Repeat("x", 99) + "\n"
		w := bufio.NewWriterSize(os.Stdout, 64<<10)
		var n int
		fmt.Sscan(os.Getenv("TERMTEST_FLOOD_BYTES"), &n)
		for ; n > 0; n -= len(line) {
			w.WriteString(line)
		}
		w.WriteString("END\n")
		w.Flush()
	},
}

func setMode(change func(*unix.Termios)) *unix.Termios {
	old, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		fmt.Println("TCGETS:", err)
		os.Exit(1)
	}
	t := *old
	change(&t)
	if err := unix.IoctlSetTermios(0, unix.TCSETS, &t); err != nil {
		fmt.Println("TCSETS:", err)
		os.Exit(1)
	}
	return old
}

func restore(old *unix.Termios) { unix.IoctlSetTermios(0, unix.TCSETS, old) }
