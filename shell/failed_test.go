package shell_test

import (
	"errors"
	"testing"

	"github.com/conch-dev/conch/shell"
)

func TestFailedProcessDeliversSpawnFailureOnce(t *testing.T) {
	p := shell.FailedProcess(errors.New("connection refused"))
	select {
	case <-p.Done():
	default:
		t.Fatal("not settled")
	}
	if p.Status() != shell.StatusKilled || p.ExitCode() != nil || p.Signal() != "" {
		t.Errorf("status %v exit %v signal %q", p.Status(), p.ExitCode(), p.Signal())
	}
	if r := p.Peek(100); r.Stderr != "spawn failed: connection refused" {
		t.Errorf("peek before the first read %+v", r)
	}
	r := p.Read()
	if r.Stdout != "" || r.Stderr != "spawn failed: connection refused" || r.Lossy {
		t.Errorf("first read %+v", r)
	}
	if r := p.Peek(100); !r.Empty() {
		t.Errorf("peek after the first read %+v", r)
	}
	if r := p.Read(); !r.Empty() {
		t.Errorf("second read %+v", r)
	}
	if p.Kill() {
		t.Error("Kill returned true")
	}
}
