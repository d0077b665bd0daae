//go:build linux

package tools_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/tools"
)

// otherHost is a local executor that says its host's file system is
// elsewhere: its home is home, and every directory is missing.
type otherHost struct {
	*local.Executor
	home string
}

func (h otherHost) Home() (string, error)        { return h.home, nil }
func (h otherHost) Dir(p string) (string, error) { return "", errors.New("no such host directory") }

// "~" and a session's directory are the executor's to answer, not the
// server's file system's.
func TestExecutorAnswersForItsHost(t *testing.T) {
	ex, err := local.New(&local.Options{SpillParent: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ts := tools.New(otherHost{ex, "/home/elsewhere"}, nil)
	r := ts.Request(tools.Session{ID: "s"}, tools.BashArgs{Command: "true", Workdir: "~/src"})
	if r.Workdir != filepath.Join("/home/elsewhere", "src") {
		t.Errorf("~/src on the executor's host: %q", r.Workdir)
	}
	if _, err := ts.HostDir(t.TempDir()); err == nil || err.Error() != "no such host directory" {
		t.Errorf("HostDir of a directory the host lacks: %v", err)
	}
}
