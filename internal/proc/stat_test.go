//go:build linux

package proc_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

// statLine builds a /proc/<pid>/stat line the way the kernel prints it
// (52 fields).
func statLine(pid int, comm string, state byte, ppid, pgid, sid, threads int, start uint64) string {
	f := make([]string, 0, 52)
	f = append(f, fmt.Sprint(pid), "("+comm+")", string(state), fmt.Sprint(ppid), fmt.Sprint(pgid), fmt.Sprint(sid))
	for i := 7; i <= 52; i++ {
		switch i {
		case 20:
			f = append(f, fmt.Sprint(threads))
		case 22:
			f = append(f, fmt.Sprint(start))
		default:
			f = append(f, fmt.Sprint(i*3))
		}
	}
	return strings.Join(f, " ") + "\n"
}

func TestParseStat(t *testing.T) {
	for _, comm := range []string{"bash", "a b", "a) b", ") (", "x)", "((", ")) ) 1 2 3", "", "tab\there", "nl\nhere"} {
		line := statLine(4242, comm, 'S', 17, 4242, 4000, 3, 987654321)
		got, err := proc.ParseStat([]byte(line))
		if err != nil {
			t.Errorf("comm %q: %v", comm, err)
			continue
		}
		want := proc.Info{Pid: 4242, PPid: 17, Pgid: 4242, Sid: 4000, TTY: 7 * 3, State: 'S', StartTime: 987654321, Comm: comm, NumThreads: 3} // statLine's field 7, tty_nr
		if got != want {
			t.Errorf("comm %q:\n got %+v\nwant %+v", comm, got, want)
		}
	}
	bad := []string{
		"",
		"42",
		"42 (x",
		"(x) S 1 1 1",
		"42 (x) S 1 1 1 0",
		"x (x) S 1 2 3 " + strings.Repeat("0 ", 20),
		"42 (x) SS 1 2 3 " + strings.Repeat("0 ", 20),
		"42 (x) S 1 2 3 " + strings.Repeat("0 ", 15) + "-1 0 0 0",
	}
	for _, line := range bad {
		if info, err := proc.ParseStat([]byte(line)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want an error", line, info)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statLine(1, "init", 'S', 0, 1, 1, 1, 5)))
	f.Add([]byte(statLine(7, "a) (b", 'Z', 1, 7, 7, 1, 9)))
	f.Add([]byte("1 (x) S"))
	f.Fuzz(func(t *testing.T, line []byte) {
		info, err := proc.ParseStat(line)
		if err != nil {
			return
		}
		// The comm of a parsed line is what lies between the first '('
		// and the last ')'.
		s := string(line)
		if want := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]; info.Comm != want {
			t.Fatalf("comm %q, want %q", info.Comm, want)
		}
	})
}

func TestStatCommWithParens(t *testing.T) {
	marker := clean(t)
	// The kernel names a process after the basename of the file it
	// executed, so a symlink gives sleep a comm with spaces and ')'.
	const comm = "a) b (c) )d"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep:", err)
	}
	link := filepath.Join(t.TempDir(), comm)
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "600")
	cmd.Env = testutil.Env(marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	info, err := proc.Stat(pid)
	cmd.Process.Kill()
	waitErr := cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	want := proc.Info{Pid: pid, PPid: os.Getpid(), Pgid: unix.Getpgrp(), Comm: comm, NumThreads: 1}
	want.Sid, _ = unix.Getsid(0)
	got := info
	got.State, got.StartTime = 0, 0
	if got != want {
		t.Errorf("Stat:\n got %+v\nwant %+v (state and start time not compared)", info, want)
	}
	if !info.Alive() || info.StartTime == 0 {
		t.Errorf("Stat = %+v: want a live process with a start time", info)
	}
	if !signalled(waitErr, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed", waitErr)
	}
	if _, err := proc.Stat(pid); !errors.Is(err, proc.ErrNotExist) {
		t.Errorf("Stat of a reaped pid: %v, want ErrNotExist", err)
	}
}

func TestScanFindsSelf(t *testing.T) {
	infos, err := proc.Scan()
	if err != nil {
		t.Fatal(err)
	}
	sid, _ := unix.Getsid(0)
	for _, p := range infos {
		if p.Pid == os.Getpid() {
			if p.PPid != os.Getppid() || p.Pgid != unix.Getpgrp() || p.Sid != sid || !p.Alive() {
				t.Errorf("self = %+v; want ppid %d pgid %d sid %d, alive", p, os.Getppid(), unix.Getpgrp(), sid)
			}
			return
		}
	}
	t.Errorf("Scan (%d processes) misses this process %d", len(infos), os.Getpid())
}

func TestSignalRefusesReusedPid(t *testing.T) {
	marker := clean(t)
	cmd := startSession(t, marker, "exec sleep 600")
	done := waitAsync(cmd)
	info, err := proc.Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stale := info
	stale.StartTime-- // what a reused pid looks like: another start time
	if err := proc.Signal(stale, syscall.SIGKILL); !errors.Is(err, proc.ErrNotExist) {
		t.Errorf("Signal with a stale start time = %v, want ErrNotExist", err)
	}
	if now, err := proc.Stat(info.Pid); err != nil || !now.Alive() {
		t.Fatalf("process hit by a stale Signal: %+v, %v", now, err)
	}
	if err := proc.Signal(info, syscall.SIGKILL); err != nil {
		t.Errorf("Signal: %v", err)
	}
	if err := recv(t, done); !signalled(err, syscall.SIGKILL) {
		t.Errorf("Wait = %v, want killed", err)
	}
	if err := proc.Signal(info, syscall.SIGKILL); !errors.Is(err, proc.ErrNotExist) {
		t.Errorf("Signal of a reaped process = %v, want ErrNotExist", err)
	}
}

func BenchmarkScan(b *testing.B) {
	n := 0
	for b.Loop() {
		infos, err := proc.Scan()
		if err != nil {
			b.Fatal(err)
		}
		n = len(infos)
	}
	b.ReportMetric(float64(n), "procs")
}

func BenchmarkStat(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		if _, err := proc.Stat(pid); err != nil {
			b.Fatal(err)
		}
	}
}
