//go:build linux

package container

import (
	"io"
	"os/exec"
	"testing"
)

// TestStreamEnd: what a Read says when the agent's output ends, by how
// its exec client (here a real shell in its place) ended: the agent's
// last words with its status, the status alone when it said nothing, the
// signal that ended it, and a clean EOF for a clean exit.
func TestStreamEnd(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"echo 'conch agent: containment unavailable' >&2; exit 1", "agent exited with status 1: conch agent: containment unavailable"},
		{"exit 3", "the exec client exited with status 3, nothing on its standard error"},
		{"kill -9 $$", "the exec client ended: signal: killed"},
		{"exit 0", "EOF"},
	} {
		st, err := startStream(exec.Command("sh", "-c", tc.script), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(st)
		got := "EOF"
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Read ended with %q, want %q", tc.script, got, tc.want)
		}
		st.Close()
	}
}
