//go:build linux

package nsinit_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/prestart"
	"github.com/conch-dev/conch/internal/proc"
)

// TestPrestart runs this test binary as `conch run` would run (its
// arguments are a run's, so package prestart starts an init from its
// initialisation: this binary, as `__init`) and checks what becomes of
// that init: Start takes it when it fits, closes it and starts another
// when its network namespace does not, and Close ends one nobody took.
// Each helper prints the pid of the init started ahead, what it found,
// and whether that pid is gone at its end. In a build with cgo the init
// is started before the helper's Go runtime (early_linux.c), except
// where the helper's standard input is closed ("from Go"): then from
// package prestart's initialisation, as in a build without cgo.
func TestPrestart(t *testing.T) {
	clean(t)
	for _, tc := range []struct {
		name, helper string
		args         []string
		want         string
		stdinClosed  bool
	}{
		// An init started with a network namespace of its own
		// (--network off: whatever the TUN device allows this user,
		// which decides the default's) does not fit a Start without a
		// network; one started without (--network on) does.
		{"taken", "prestart-start", []string{"run", "--network", "on", "--", "true"}, "netns=false adopted=true env=GOMAXPROCS=1,GOGC=off leftover=false ran=ok gone=true", false},
		{"not fitting", "prestart-start", []string{"run", "--network", "off", "--", "true"}, "netns=true adopted=false env=GOMAXPROCS=1,GOGC=off leftover=false ran=ok gone=true", false},
		{"not taken", "prestart-close", []string{"run", "--network", "off", "--", "true"}, "netns=true own-namespaces=true gone=true", false},
		{"taken, from Go", "prestart-start", []string{"run", "--network", "on", "--", "true"}, "netns=false adopted=true env=GOMAXPROCS=1,GOGC=off leftover=false ran=ok gone=true", true},
		{"not fitting, from Go", "prestart-start", []string{"run", "--network", "off", "--", "true"}, "netns=true adopted=false env=GOMAXPROCS=1,GOGC=off leftover=false ran=ok gone=true", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				tc.want = strings.Replace(tc.want, "env=GOMAXPROCS=1,GOGC=off", "env=unreadable", 1)
			}
			cmd := exec.Command(os.Args[0], tc.args...)
			if tc.stdinClosed {
				cmd = exec.Command("sh", append([]string{"-c", `exec "$0" "$@" <&-`, os.Args[0]}, tc.args...)...)
			}
			cmd.Env = append(os.Environ(), helperEnv+"="+tc.helper, noRaceSleep)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("helper printed %q, want %q", got, tc.want)
			}
		})
	}
}

// prestartStartHelper starts an init with the options conch gives its
// own (no network) and reports whether it is the one started ahead, and
// its environment (its runtime's settings: prestart.Env), either way.
func prestartStartHelper() int {
	ahead, netNS, err := aheadInit()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	in, err := nsinit.Start(&nsinit.Options{Args: []string{nsinit.HelperArg}, Stderr: os.Stderr})
	if err != nil {
		fmt.Println("Start:", err)
		return 1
	}
	// An unprivileged user cannot read it: the init is not dumpable.
	env := "unreadable"
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", in.Pid())); err == nil {
		env = strings.Join(strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00"), ",")
	}
	ran := "ok"
	if ch, err := in.Spawn(nsinit.Command{Path: bashPath, Args: []string{"bash", "-c", "exit 3"}, Dir: "/"}); err != nil {
		ran = err.Error()
	} else if ws, err := ch.Wait(); err != nil || ws.ExitStatus() != 3 {
		ran = fmt.Sprintf("%v %v", ws, err)
	} else {
		ch.Release()
	}
	// Taken by Start, adopted or closed: nothing is left to take.
	leftover := prestart.Take(func(int) {}) != nil
	adopted := in.Pid() == ahead
	in.Close()
	fmt.Printf("netns=%v adopted=%v env=%s leftover=%v ran=%s gone=%v\n", netNS, adopted, env, leftover, ran, gone(ahead))
	return 0
}

// prestartCloseHelper takes nothing: Close must end the init started
// ahead, which waits in namespaces of its own.
func prestartCloseHelper() int {
	ahead, netNS, err := aheadInit()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	own := nsLink(ahead, "pid") != nsLink(os.Getpid(), "pid") && nsLink(ahead, "user") != nsLink(os.Getpid(), "user")
	prestart.Close()
	fmt.Printf("netns=%v own-namespaces=%v gone=%v\n", netNS, own, gone(ahead))
	return 0
}

// aheadInit makes this helper a server (a child subreaper running the
// orphan reaper) and returns the pid of the init started ahead, this
// process's only child once the start is over, and whether it has a
// network namespace of its own.
func aheadInit() (pid int, netNS bool, err error) {
	proc.BecomeSubreaper()
	prestart.Wait()
	files, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, w := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) != 1 {
		return 0, false, fmt.Errorf("children %v, want the init started ahead alone", pids)
	}
	return pids[0], nsLink(pids[0], "net") != nsLink(os.Getpid(), "net"), nil
}

func nsLink(pid int, ns string) string {
	l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
	return l
}

// gone reports whether pid no longer exists (reaped, not a zombie).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
