//go:build linux

package nsinit_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/sandbox"
)

// TestSupervisorConnectWaits: the supervisor connects a command's
// sockets itself (TestSupervisorUnixSockets says why). A blocking
// connect that has to wait (a TCP listener whose queue is full drops the
// handshake; a unix listener's full queue refuses it) completes when the
// listener makes room, times out by the socket's SO_SNDTIMEO as the
// kernel would, and, when the command is killed while it waits, is
// dropped by the supervisor at once: it holds no worker and no socket
// for the two minutes a TCP handshake takes to fail, or forever.
func TestSupervisorConnectWaits(t *testing.T) {
	marker := clean(t)
	h := newSandboxHost(t, marker)
	tcpFD, tcpSA := fullListener(t, unix.AF_INET, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	tcpPort := strconv.Itoa(tcpSA.(*unix.SockaddrInet4).Port)
	sock := filepath.Join(h.home, "full.sock")
	unixFD, _ := fullListener(t, unix.AF_UNIX, &unix.SockaddrUnix{Name: sock})
	os.Chmod(sock, 0o777)
	p := h.policy(sandbox.NetworkOn)
	p.UnixSockets = []string{sock}
	in, _ := startSandboxed(t, &p)

	for _, c := range []struct {
		name, env, timedOut string
		listener            int
	}{
		{"tcp", "CONNECT_TCP=" + tcpPort, "operation now in progress", tcpFD},
		{"unix", "CONNECT_UNIX=" + sock, "resource temporarily unavailable", unixFD},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Made room for, the connect completes. (TCP: the client's
			// next SYN, a second after the first, gets through.)
			ch, name, lines := h.startConnect(t, in, c.env)
			waitHeld(t, name, ch)
			acceptOne(t, c.listener)
			if out := waitLines(t, ch, lines); out != "connected\n" {
				t.Errorf("after the listener made room: %q, want connected", out)
			}
			// The helper's connection, never accepted, fills the queue
			// again.

			// Its SO_SNDTIMEO runs out: the kernel's answer.
			ch, _, lines = h.startConnect(t, in, c.env, "CONNECT_TIMEOUT_MS=300")
			if out := waitLines(t, ch, lines); out != c.timedOut+"\n" {
				t.Errorf("with SO_SNDTIMEO: %q, want %q", out, c.timedOut)
			}

			// Killed while it waits: the supervisor lets the socket go.
			ch, name, lines = h.startConnect(t, in, c.env)
			waitHeld(t, name, ch)
			ch.Signal(syscall.SIGKILL)
			waitLines(t, ch, lines)
			deadline := time.Now().Add(10 * time.Second)
			for !released(name) {
				if time.Now().After(deadline) {
					t.Fatalf("10 s after its command was killed, %s is still open (held by %v)", name, holders(name))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// fullListener listens on a socket of domain dom bound to sa with a
// backlog of 0, and fills its queue with one connection; it returns the
// listener and its address.
func fullListener(t *testing.T, dom int, sa unix.Sockaddr) (int, unix.Sockaddr) {
	t.Helper()
	socket := func() int {
		fd, err := unix.Socket(dom, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	l := socket()
	if err := unix.Bind(l, sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 0); err != nil {
		t.Fatal(err)
	}
	got, err := unix.Getsockname(l)
	if err != nil {
		t.Fatal(err)
	}
	// One connection fills a queue of backlog 0.
	if err := unix.Connect(socket(), got); err != nil {
		t.Fatal(err)
	}
	return l, got
}

// acceptOne takes a connection from listener l's queue.
func acceptOne(t *testing.T, l int) {
	t.Helper()
	c, _, err := unix.Accept4(l, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(c)
}

// startConnect starts the connect-wait helper with env, and returns it,
// the name of its socket's open file, and its further output.
func (h *sandboxHost) startConnect(t *testing.T, in *nsinit.Init, env ...string) (*nsinit.Child, string, chan string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := in.Spawn(nsinit.Command{Path: exe, Args: []string{exe}, Env: append(append(h.env[:len(h.env):len(h.env)], env...), helperEnv+"=connect-wait", noRaceSleep), Dir: h.ws, Stdout: w, Stderr: w})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	lines := make(chan string, 8)
	go func() {
		defer r.Close()
		defer close(lines)
		s := bufio.NewScanner(r)
		for s.Scan() {
			lines <- s.Text() + "\n"
		}
	}()
	select {
	case name := <-lines:
		if !strings.HasPrefix(name, "socket:[") {
			t.Fatalf("helper: %q", name)
		}
		return ch, strings.TrimSpace(name), lines
	case <-time.After(time.Minute):
		t.Fatal("the helper printed nothing in a minute")
	}
	return nil, "", nil
}

// waitLines waits for ch to exit and returns the rest of its output.
func waitLines(t *testing.T, ch *nsinit.Child, lines chan string) string {
	t.Helper()
	waitLong(t, ch)
	ch.Release()
	var out strings.Builder
	for l := range lines {
		out.WriteString(l)
	}
	return out.String()
}

// waitHeld waits until the helper's connect of the socket named waits
// in the supervisor: a thread of the helper (the process holding the
// socket that can be read) is in connect(2) and, where this test can see the
// supervisor's descriptors (as root: an unprivileged user cannot read
// the non-dumpable init's), a second process holds the socket. It fails
// t if ch exits first.
func waitHeld(t *testing.T, name string, ch *nsinit.Child) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pids := holders(name)
		inConnect := false
		for _, pid := range pids {
			inConnect = inConnect || inSyscall(pid, unix.SYS_CONNECT)
		}
		if inConnect && (len(pids) > 1 || os.Getuid() != 0) {
			return
		}
		select {
		case <-ch.Exited():
			t.Fatal("the helper exited before its connect waited")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's connect is not waiting in the supervisor after a minute (held by %v)", name, pids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inSyscall reports whether a thread of process pid is in system call
// nr (the helper's connect need not be on its first thread: Go moves
// goroutines between threads).
func inSyscall(pid, nr int) bool {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/syscall")
		if strings.HasPrefix(string(b), strconv.Itoa(nr)+" ") {
			return true
		}
	}
	return false
}

// released reports whether the socket named is gone: no process this
// test can see holds it, and the kernel lists no socket of its inode
// (/proc/net/tcp and unix list every socket of this network namespace,
// the sandbox's when the network is on).
func released(name string) bool {
	if len(holders(name)) > 0 {
		return false
	}
	ino := strings.TrimSuffix(strings.TrimPrefix(name, "socket:["), "]")
	for _, f := range []string{"/proc/net/tcp", "/proc/net/unix"} {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			// tcp: inode is the 10th field; unix: the 7th.
			if len(fields) >= 10 && fields[9] == ino || len(fields) >= 7 && fields[6] == ino {
				return false
			}
		}
	}
	return true
}

// holders lists the processes with a descriptor of the open file named
// (as /proc/<pid>/fd links read).
func holders(name string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + p.Name() + "/fd")
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/" + p.Name() + "/fd/" + fd.Name()); l == name {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
