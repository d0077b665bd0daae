//go:build linux

package local_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

const serverEnv = "CONCHTEST_SIGKILL_SERVER"

// sigkillServer is the server that TestServerSIGKILL kills (TestMain runs
// it instead of the tests, with serverEnv naming the spill parent): it
// starts a command, prints its shell's pid and waits to be killed.
func sigkillServer() {
	ex, err := local.New(&local.Options{SpillParent: os.Getenv(serverEnv)})
	if err != nil {
		panic(err)
	}
	// "; :" keeps bash from exec'ing the last sleep: the shell stays.
	spec, err := ex.Resolve(shell.Request{Command: "sleep 600 & setsid sleep 601 & echo $$; sleep 602; :"})
	if err != nil {
		panic(err)
	}
	p, err := ex.Start(spec)
	if err != nil {
		panic(err)
	}
	for {
		if r := p.Read(); r.Stdout != "" {
			os.Stdout.WriteString("shell " + r.Stdout)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Minute)
	os.Exit(1)
}

// A SIGKILLed server leaves no shell behind: the parent-death signal
// kills each command's bash. What those shells started is NOT killed
// (group members, escapees and the foreground child alike; the kernel
// boundary of a later wave will take them): this test logs them and
// cleans up.
func TestServerSIGKILL(t *testing.T) {
	marker := testutil.Marker(t)
	if err := proc.BecomeSubreaper(); err != nil { // orphans come to us, so we can clean up
		t.Fatal(err)
	}
	server := exec.Command(os.Args[0])
	server.Env = append(testutil.Env(marker), serverEnv+"="+t.TempDir())
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "shell ") {
		server.Process.Kill()
		server.Wait()
		t.Fatalf("server said %q, %v", line, err)
	}
	shellPid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "shell ")))
	shellInfo, err := proc.Stat(shellPid)
	if err != nil {
		t.Fatal(err)
	}
	waitSleeps(t, marker, "600", "601", "602")
	server.Process.Signal(syscall.SIGKILL)
	server.Wait()

	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := proc.Stat(shellPid)
		if err != nil || p.StartTime != shellInfo.StartTime || !p.Alive() {
			break
		}
		if time.Now().After(deadline) {
			t.Error("the command's shell outlived the SIGKILLed server")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	left := testutil.Processes(marker)
	for _, p := range left {
		t.Logf("survived the server's SIGKILL: pid %d pgid %d sid %d: %s", p.Pid, p.Pgid, p.Sid, testutil.Cmdline(p.Pid))
		proc.Signal(p, syscall.SIGKILL)
	}
	testutil.AssertNoProcesses(t, marker)
}
