//go:build linux

package containertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	dockerd    *exec.Cmd // the tests' own dockerd, once started
	dockerDir  string
	dockerLog  *os.File
	dockerSkip string // why docker cannot run here, once known
)

// Docker starts a dockerd of the tests' own, once per test binary, with
// its data, state and socket in a temporary directory, no bridge and no
// iptables rules, points DOCKER_HOST at it (for the docker command this
// process and its children run), and returns docker's path; Setup's
// cleanup stops it and removes its directory. It skips t, saying why,
// only when this machine cannot run it: no dockerd installed (.ci/run
// installs Debian's docker.io), or a dockerd that does not answer.
func Docker(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("containertest: these tests start dockerd: run them as root (CI does)")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if dockerSkip != "" {
		t.Skip(dockerSkip)
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		dockerSkip = "containertest: no docker command: apt-get install -y --no-install-recommends docker.io (.ci/run does)"
		t.Skip(dockerSkip)
	}
	if dockerd != nil {
		return docker
	}
	bin, err := exec.LookPath("dockerd")
	if err != nil {
		dockerSkip = "containertest: no dockerd: apt-get install -y --no-install-recommends docker.io (.ci/run does)"
		t.Skip(dockerSkip)
	}
	dir, err := os.MkdirTemp("", "conch-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	sock := "unix://" + filepath.Join(dir, "docker.sock")
	cmd := exec.Command(bin, "--host", sock, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "pid"), "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		dockerSkip = fmt.Sprintf("containertest: dockerd does not start here: %v", err)
		t.Skip(dockerSkip)
	}
	dockerd, dockerDir, dockerLog = cmd, dir, log
	os.Setenv("DOCKER_HOST", sock)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := Output(docker, nil, "version"); err == nil {
			return docker
		}
		// No goroutine waits for it (the leak check would count it): an
		// exited dockerd is a zombie until stopDockerLocked reaps it.
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); !strings.Contains(string(stat), ") Z ") && time.Now().Before(deadline) {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		stopDockerLocked()
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		dockerSkip = "containertest: dockerd does not answer here; its last words: " + lines[len(lines)-1]
		t.Skip(dockerSkip)
	}
}

// stopDockerLocked stops the tests' dockerd and removes its directory.
func stopDockerLocked() {
	if dockerd == nil {
		return
	}
	dockerd.Process.Signal(os.Interrupt)
	kill := time.AfterFunc(20*time.Second, func() { dockerd.Process.Kill() })
	dockerd.Wait()
	kill.Stop()
	dockerLog.Close()
	exec.Command("umount", "-R", dockerDir).Run() // what dockerd left mounted, if anything
	os.RemoveAll(dockerDir)
	os.Unsetenv("DOCKER_HOST")
	dockerd = nil
}
