//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestBinaryRenamedOver: conch's binary lies in a writable root (built
// into the workspace, as in CI's /tmp); a command renames another
// program over it and tries to write into it. The next session's init
// still runs conch, not that program. As root and as uid 65534.
func TestBinaryRenamedOver(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			s := newAttackSetup(t, nobody)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
			bin := filepath.Join(s.wsB, "conch")
			copyBinary(t, testutil.ConchBinary(t), bin)
			if nobody {
				chownTree(t, s.wsB)
			}
			srv := startHTTPServeBinary(t, bin, s.marker, "127.0.0.1:0", nobody, s.env()...)
			a := s.connect(t, srv, s.wsB)
			// In place: the kernel refuses to write a running program.
			if got := text(t, callTool(t, a, "bash", bash("cat /usr/bin/true > "+bin))); got != "[stderr]\nbash: line 1: "+bin+": Text file busy\n[exit code: 1]" {
				t.Errorf("writing into the binary: %q", got)
			}
			pwned := filepath.Join(s.wsB, "pwned")
			evil := "printf '#!/bin/sh\\necho pwned > " + pwned + "\\n' > evil && chmod +x evil && mv evil " + bin + " && echo renamed"
			if got := text(t, callTool(t, a, "bash", bash(evil))); got != "renamed\n" {
				t.Fatalf("the rename: %q", got)
			}
			b := s.connect(t, srv, s.wsA)
			if got := text(t, callTool(t, b, "bash", bash("echo still conch"))); got != "still conch\n" {
				t.Errorf("the next session: %q", got)
			}
			if _, err := os.Stat(pwned); err == nil {
				t.Error("the next session's init ran the program renamed over conch's binary")
			}
			a.Close()
			b.Close()
		})
	}
}

// copyBinary copies the program from into to by a cp child: a
// descriptor this process opened for writing would be inherited, for
// the moment before its exec, by whatever another test forks meanwhile,
// and an exec of to in that moment fails with ETXTBSY (golang.org/issue/22315).
func copyBinary(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp %s %s: %v: %s", from, to, err, out)
	}
}

// TestSpillOfOtherServers: two servers of the same user (two agent
// windows) give their sessions the same name; a command of one sees no
// spill directory of the other's, nor of its own server's other
// sessions. As root and as uid 65534.
func TestSpillOfOtherServers(t *testing.T) {
	t.Parallel()
	for _, nobody := range []bool{false, true} {
		t.Run(fmt.Sprintf("nobody=%v", nobody), func(t *testing.T) {
			t.Parallel()
			s := newAttackSetup(t, nobody)
			t.Cleanup(func() { testutil.AssertNoProcesses(t, s.marker) })
			one := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
			two := startHTTPServeAs(t, s.marker, "127.0.0.1:0", nobody, s.env()...)
			a, b := s.connect(t, one, s.wsA), s.connect(t, two, s.wsB)
			m := spillPath.FindStringSubmatch(text(t, callTool(t, a, "bash", bash("seq 1 400000"))))
			if m == nil {
				t.Fatal("the long output names no spill file")
			}
			spill := m[1]
			root := filepath.Dir(filepath.Dir(filepath.Dir(spill)))
			if root != filepath.Join(s.tmp, fmt.Sprintf("conch-%d", uidOf(nobody))) {
				t.Errorf("spill file %s is not under the user's spill root", spill)
			}
			// B's own spill directory exists once it spilled too.
			text(t, callTool(t, b, "bash", bash("seq 1 400000")))
			got := text(t, callTool(t, b, "bash", bash("head -1 "+spill+"; find "+root+" -name 's-*' | wc -l")))
			if want := "1\n[stderr]\nhead: cannot open '" + spill + "' for reading: No such file or directory\n"; got != want {
				t.Errorf("server two's session reading server one's spill file:\n got %q\nwant %q", got, want)
			}
			a.Close()
			b.Close()
		})
	}
}

func uidOf(nobody bool) int {
	if nobody {
		return testutil.UnprivilegedID
	}
	return os.Geteuid()
}
