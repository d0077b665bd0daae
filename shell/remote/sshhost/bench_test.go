//go:build linux

package sshhost_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote/sshhost"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime 200x ./shell/remote/sshhost/
//
// Each benchmark measures conch and its baseline in the same run,
// interleaved, against the same sshd, and reports the ratio.

// benchHost starts an sshd (the agent on the host already) and returns a
// warm executor of it and the ssh command line (with a warm ControlMaster
// socket) that reaches the same server as the same user.
func benchHost(b *testing.B) (shell.Executor, []string) {
	s := startDeployed(b)
	c := newClient(b)
	c.alias(b, "h", s, 0)
	ex, err := sshhost.New(sshhost.Host{Name: "h", SSH: "h"}, c.options())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	if r := runB(b, ex, "true"); r.ExitCode == nil || *r.ExitCode != 0 {
		b.Fatalf("warm-up: %+v", r)
	}
	cm := filepath.Join(c.Dir, "cm")
	ssh := []string{"ssh", "-F", c.SSHConfig, "-o", "UserKnownHostsFile=" + c.KnownHosts, "-o", "BatchMode=yes",
		"-o", "ControlMaster=auto", "-o", "ControlPath=" + cm, "-o", "ControlPersist=120", "h"}
	if out, err := exec.Command(ssh[0], append(ssh[1:], "true")...).CombinedOutput(); err != nil {
		b.Fatalf("ssh warm-up: %v: %s", err, out)
	}
	b.Cleanup(func() { exec.Command(ssh[0], append(ssh[1:len(ssh)-1], "-O", "exit", "h")...).Run() })
	return ex, ssh
}

func runB(b *testing.B, ex shell.Executor, cmd string) shell.Result {
	spec, err := ex.Resolve(shell.Request{Command: cmd})
	if err != nil {
		b.Fatal(err)
	}
	r, err := shell.Run(context.Background(), ex, spec)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkEchoWarm: `echo hi` on a warm connection, against the local
// provider and against ssh with a warm control socket.
func BenchmarkEchoWarm(b *testing.B) {
	ex, ssh := benchHost(b)
	loc, err := local.New(&local.Options{SpillParent: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer loc.Close()
	var rem, lo, sh []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		runB(b, ex, "echo hi")
		t1 := time.Now()
		runB(b, loc, "echo hi")
		t2 := time.Now()
		if err := exec.Command(ssh[0], append(ssh[1:], "echo hi")...).Run(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		rem, lo, sh = append(rem, t1.Sub(t0)), append(lo, t2.Sub(t1)), append(sh, t3.Sub(t2))
	}
	b.StopTimer()
	r, l, s := p50(rem), p50(lo), p50(sh)
	b.ReportMetric(float64(r.Microseconds()), "remote-p50-µs")
	b.ReportMetric(float64(l.Microseconds()), "local-p50-µs")
	b.ReportMetric(float64(s.Microseconds()), "ssh-cm-p50-µs")
	b.ReportMetric(float64(r)/float64(l), "remote/local")
	b.ReportMetric(float64(r)/float64(s), "remote/ssh-cm")
}

// BenchmarkOutput100MB: 100 MB of output on the host, its tail and spill
// file as locally, against `ssh host 'head -c 100M /dev/zero' > /dev/null`;
// and the peak memory of this process (the client).
func BenchmarkOutput100MB(b *testing.B) {
	ex, ssh := benchHost(b)
	var rem, sh []time.Duration
	// The peak from here on: the host's set-up (preload reads the
	// agent's binary, tens of megabytes, into this process) is not the
	// client's cost of the output. Writing 5 to clear_refs resets VmHWM
	// to the current RSS (Linux 4.0).
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("reset the peak RSS: %v", err)
	}
	before := vmHWM(b)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r := runB(b, ex, "head -c 100M /dev/zero")
		t1 := time.Now()
		if !r.Stdout.Truncated {
			b.Fatalf("100 MB not truncated: %+v", r.Stdout.SpillPath)
		}
		cmd := exec.Command(ssh[0], append(ssh[1:], "head -c 100M /dev/zero")...) // stdout: /dev/null
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("%v: %s", err, errb.String())
		}
		t2 := time.Now()
		rem, sh = append(rem, t1.Sub(t0)), append(sh, t2.Sub(t1))
	}
	b.StopTimer()
	const mb = 100 << 20
	r, s := p50(rem), p50(sh)
	b.ReportMetric(mb/r.Seconds()/1e6, "remote-MB/s")
	b.ReportMetric(mb/s.Seconds()/1e6, "ssh-MB/s")
	b.ReportMetric(s.Seconds()/r.Seconds(), "remote/ssh-throughput")
	b.ReportMetric(float64(vmHWM(b)-before)/(1<<20), "client-peak-growth-MiB")
	b.ReportMetric(float64(vmHWM(b))/(1<<20), "client-peak-MiB")
}

// vmHWM is this process's peak resident set size.
func vmHWM(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM")
	return 0
}
