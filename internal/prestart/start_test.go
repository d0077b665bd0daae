//go:build linux

package prestart_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/prestart"
	"github.com/conch-dev/conch/internal/testutil"
)

const helperEnv = "PRESTART_TEST_HELPER"

// TestMain makes the test binary the init a start executes (`__init`:
// it waits for its socket to close) or, for a helper run with a conch
// run's arguments, reports the init early_linux.c started.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == prestart.HelperArg {
		// Started (its runtime's and packages' own reads done): a
		// byte says so to describe. Raw calls: no descriptor of Go's
		// poller is made.
		syscall.Write(3, []byte{'.'})
		var b [512]byte
		for {
			n, err := syscall.Read(3, b[:])
			if n <= 0 && err != syscall.EINTR {
				os.Exit(0)
			}
		}
	}
	if os.Getenv(helperEnv) == "early" {
		os.Exit(earlyHelper())
	}
	testutil.VerifyTestMain(m)
}

// earlyHelper prints what describe says of the init started ahead and
// ends it.
func earlyHelper() int {
	p := prestart.Take(func(int) {})
	if p == nil {
		fmt.Println("no init started ahead")
		return 1
	}
	fmt.Print(describe(p))
	return 0
}

// TestEarlyStartMatches holds the start early_linux.c makes before the
// Go runtime to the one this package's initialisation makes (StartGo):
// the same process group, namespaces, id maps, setgroups, ambient
// capabilities, arguments, environment and descriptors, as root and as
// an ordinary user, with and without a network namespace.
func TestEarlyStartMatches(t *testing.T) {
	if !prestart.HaveEarly {
		t.Skip("built without cgo: no constructor starts an init")
	}
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("runs as root; the unprivileged subtest runs as this user")
		}
		compareStarts(t)
	})
	t.Run("unprivileged", func(t *testing.T) {
		if !testutil.AsUnprivileged(t) {
			return
		}
		compareStarts(t)
	})
}

func compareStarts(t *testing.T) {
	for _, netNS := range []bool{false, true} {
		network := map[bool]string{false: "on", true: "off"}[netNS]
		p, err := prestart.StartGo(netNS)
		if err != nil {
			t.Fatalf("the Go start: %v", err)
		}
		goStart := describe(p)
		cmd := exec.Command(os.Args[0], "run", "--network", network, "--", "true")
		cmd.Env = append(os.Environ(), helperEnv+"=early")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		if got := string(out); got != goStart {
			t.Errorf("network %s: early_linux.c's start:\n%s\nthe Go start:\n%s", network, got, goStart)
		}
		// What both must be, whatever they share.
		for _, want := range wantedTraits(netNS) {
			if !strings.Contains(goStart, want+"\n") {
				t.Errorf("network %s: start lacks %q:\n%s", network, want, goStart)
			}
		}
	}
}

// wantedTraits are lines describe must print for any start of conch's
// init by this user.
func wantedTraits(netNS bool) []string {
	uid, gid := os.Getuid(), os.Getgid()
	want := []string{
		"process group: its own",
		"namespaces of its own: " + map[bool]string{false: "mnt pid user", true: "mnt net pid user"}[netNS],
		"args: __init",
		"env: GOMAXPROCS=1 GOGC=off",
		"fd 0: /dev/null", "fd 1: /dev/null", "fd 3: socket", "other fds: 0 []",
	}
	if uid == 0 {
		return append(want, "uid_map: 0 0 4294967295", "gid_map: 0 0 4294967295", "CapAmb: 0000000000000000")
	}
	return append(want, fmt.Sprintf("uid_map: %d %d 1", uid, uid), fmt.Sprintf("gid_map: %d %d 1", gid, gid),
		"setgroups: deny", "CapAmb: 0000000000281102")
}

// describe reports what of an init's process its start decides, ends
// it and waits for it.
func describe(p *prestart.Process) string {
	pid := p.Proc.Pid
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	if _, err := p.Conn.Read(make([]byte, 1)); err != nil {
		line("no word from it: %v", err)
	}
	if pg, err := syscall.Getpgid(pid); err == nil && pg == pid {
		line("process group: its own")
	} else {
		line("process group: %d (%v)", pg, err)
	}
	var own []string
	for _, ns := range []string{"mnt", "net", "pid", "user"} {
		if link(pid, "ns/"+ns) != link(os.Getpid(), "ns/"+ns) {
			own = append(own, ns)
		}
	}
	line("namespaces of its own: %s", strings.Join(own, " "))
	for _, f := range []string{"uid_map", "gid_map", "setgroups"} {
		line("%s: %s", f, strings.Join(strings.Fields(read(pid, f)), " "))
	}
	s := bufio.NewScanner(strings.NewReader(read(pid, "status")))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && (k == "CapInh" || k == "CapAmb") {
			line("%s: %s", k, strings.TrimSpace(v))
		}
	}
	args := strings.Split(strings.TrimRight(read(pid, "cmdline"), "\x00"), "\x00")
	exe, _ := os.Executable()
	if args[0] == exe {
		args[0] = ""
	}
	line("args: %s", strings.TrimSpace(strings.Join(args, " ")))
	line("env: %s", strings.Join(strings.Split(strings.TrimRight(read(pid, "environ"), "\x00"), "\x00"), " "))
	var starter []string
	mine, _ := os.ReadDir("/proc/self/fd")
	for _, e := range mine {
		starter = append(starter, link(os.Getpid(), "fd/"+e.Name()))
	}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var others []string
	for _, e := range ents {
		l := link(pid, "fd/"+e.Name())
		switch e.Name() {
		case "0", "1", "3":
			if strings.HasPrefix(l, "socket:") {
				l = "socket"
			}
			line("fd %s: %s", e.Name(), l)
		case "2":
			if l != link(os.Getpid(), "fd/2") {
				line("fd 2: %s, not its starter's", l)
			}
		default:
			// Descriptors its starter has (left open by whoever
			// started the test) are not the start's.
			if !slices.Contains(starter, l) {
				others = append(others, e.Name()+"="+l)
			}
		}
	}
	line("other fds: %d %v", len(others), others)
	p.Conn.Close()
	if st, err := p.Proc.Wait(); err != nil || !st.Success() {
		line("its end: %v %v", st, err)
	}
	return b.String()
}

func link(pid int, name string) string {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return err.Error()
	}
	return l
}

func read(pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if errors.Is(err, os.ErrNotExist) {
		return "(none)"
	}
	if err != nil {
		return err.Error()
	}
	return string(b)
}
