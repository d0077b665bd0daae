//go:build linux

package remote_test

import (
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/term"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
	"github.com/conch-dev/conch/shell/remote"
)

// startTerminal starts command on a terminal of ex, failing t on an error.
func startTerminal(t *testing.T, ex markedExec, command string) shell.Terminal {
	t.Helper()
	spec, err := ex.Resolve(shell.Request{Command: command})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := ex.Executor.StartTerminal(spec)
	if err != nil {
		t.Fatalf("StartTerminal(%q): %v", command, err)
	}
	return tm
}

// A terminal on the host: its prompt, an answer typed into it, its exit,
// its raw stream, and the terminal's own words for a key it does not
// know and for input after the end.
func TestTerminal(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		tm := startTerminal(t, ex, `read -p "name? " x; echo "hi $x"; exit 3`)
		testutil.WaitFor(t, 10*time.Second, "the prompt", func() bool { return strings.Contains(tm.Peek(100), "name?") })
		if _, err := tm.Input("", []string{"Ctrl-C"}, 0); err == nil || err.Error() != (&term.UnknownKeyError{Key: "Ctrl-C"}).Error() {
			t.Errorf("an unknown key: %v", err)
		}
		out, err := tm.Input("bob", []string{"Enter"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-tm.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("terminal still running 10 s after its answer")
		}
		if out += tm.Read(); !strings.Contains(out, "hi bob") {
			t.Errorf("after the answer: %q", out)
		}
		if code, sig := tm.Exit(); code == nil || *code != 3 || sig != "" {
			t.Errorf("exit %v %q, want 3", code, sig)
		}
		if raw := tm.Raw(); raw.Host != "h1" || raw.Size == 0 || raw.Size != tm.Written() {
			t.Errorf("raw stream %+v, written %d", raw, tm.Written())
		}
		if _, err := tm.Input("x", nil, 0); err == nil || strings.HasPrefix(err.Error(), "agent:") {
			t.Errorf("input after the end: %v", err)
		}
	})
}

// A terminal's raw stream names its spill file on the host while the
// program still runs, once it outgrew the tail.
func TestTerminalRawWhileRunning(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, _ := newExec(t, tr, nil)
		tm := startTerminal(t, ex, "head -c 200000 /dev/zero | tr '\\0' x; sleep 30")
		testutil.WaitFor(t, 10*time.Second, "200000 bytes on the terminal", func() bool { return tm.Written() >= 200000 })
		if raw := tm.Raw(); raw.SpillPath == "" || raw.Host != "h1" || raw.Size < 200000 || !raw.Truncated {
			t.Errorf("raw while running: %+v", raw)
		}
		tm.Kill()
		<-tm.Done()
	})
}

// A terminal cut by a lost connection ends, and its next read is the lost
// marker, once.
func TestTerminalLost(t *testing.T) {
	forEach(t, func(t *testing.T, tr transport) {
		ex, _, drop := newExec(t, tr, nil)
		tm := startTerminal(t, ex, "echo ready; sleep 30")
		testutil.WaitFor(t, 10*time.Second, "the terminal's output", func() bool { return strings.Contains(tm.Peek(100), "ready") })
		tm.Read()
		drop()
		select {
		case <-tm.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("terminal still running here 10 s after its connection was lost")
		}
		if got, want := tm.Read(), remote.LostMarker("h1")+"\n"; got != want {
			t.Errorf("read after the loss: %q, want %q", got, want)
		}
		if got := tm.Read(); got != "" {
			t.Errorf("second read: %q, want nothing", got)
		}
	})
}

// An agent whose executor has no terminals refuses one with the text of
// a host without terminals (docs/terminal.md).
func TestTerminalNotAvailable(t *testing.T) {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	d := remote.DialFunc(func(ctx context.Context) (io.ReadWriteCloser, error) {
		ex, err := local.New(&local.Options{SpillParent: t.TempDir()})
		if err != nil {
			return nil, err
		}
		client, server := net.Pipe()
		wg.Go(func() {
			// Only the seam's Executor: no Terminals.
			agent.Serve(server, server, struct{ shell.Executor }{ex}, agent.Hello{Conch: "test", OS: runtime.GOOS, Arch: runtime.GOARCH})
			server.Close()
		})
		return client, nil
	})
	ex, err := remote.New("h1", d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	spec, _ := ex.Resolve(shell.Request{Command: "true"})
	if _, err := ex.StartTerminal(spec); err == nil || err.Error() != "tty is not available on host h1" {
		t.Errorf("StartTerminal on an agent without terminals: %v", err)
	}
}
