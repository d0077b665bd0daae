//go:build linux

package proc_test

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/conch-dev/conch/internal/proc"
)

// TestKeepStatFiles: with the stat files kept, a scan lists what a scan
// without them lists (the same fields of the same processes), keeps a
// file per process it read, and drops the file of a process once it is
// reaped; a process that exits reads as a zombie through its kept file
// until then.
func TestKeepStatFiles(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	proc.KeepStatFiles()
	t.Cleanup(proc.DropStatFiles)
	find := func(infos []proc.Info) (proc.Info, bool) {
		i := slices.IndexFunc(infos, func(p proc.Info) bool { return p.Pid == pid })
		if i < 0 {
			return proc.Info{}, false
		}
		return infos[i], true
	}
	scan := func() []proc.Info {
		t.Helper()
		infos, err := proc.Scan()
		if err != nil {
			t.Fatal(err)
		}
		return infos
	}
	first := scan()
	if _, ok := proc.KeptStatFiles()[pid]; !ok {
		t.Fatalf("no stat file kept for %d after a scan", pid)
	}
	p, ok := find(first)
	if !ok || p.State == 'Z' {
		t.Fatalf("the sleep in the first scan: %+v, %v", p, ok)
	}
	// The second scan reads the kept file: the same process (its state
	// may have changed: the file is read afresh).
	fd := proc.KeptStatFiles()[pid]
	if q, ok := find(scan()); !ok || q.StartTime != p.StartTime || q.Comm != p.Comm || q.PPid != p.PPid {
		t.Errorf("through its kept file: %+v, want %+v", q, p)
	}
	if proc.KeptStatFiles()[pid] != fd {
		t.Error("the kept file was opened again")
	}

	// Exited, not reaped: a zombie, through the same file.
	cmd.Process.Kill()
	for {
		q, ok := find(scan())
		if !ok {
			t.Fatal("the killed sleep left the scan before it was reaped")
		}
		if q.State == 'Z' {
			break
		}
	}
	cmd.Wait()
	if _, ok := find(scan()); ok {
		t.Error("the reaped sleep is still listed")
	}
	if _, ok := proc.KeptStatFiles()[pid]; ok {
		t.Error("the reaped sleep's stat file is still kept")
	}
}
