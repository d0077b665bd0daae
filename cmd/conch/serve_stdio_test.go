//go:build linux

package main

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestServeStdioBadInput: the built binary answers lines that are not a
// JSON-RPC message with an error (id null) and serves on, and exits 0 at
// the end of its input.
func TestServeStdioBadInput(t *testing.T) {
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	cmd := exec.Command(testutil.ConchBinary(t), "serve")
	cmd.Env = append(testutil.Env(marker), "TMPDIR="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = newLogBuffer(t, "conch serve")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// Wait returns once the server exits, which it does only at the end
	// of its input: the answers have all been read by then.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("conch serve: %v, want exit 0", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("conch serve did not exit within 10s of the end of its input")
		}
	}()
	for _, c := range []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "-"},
		{"not json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"batches are not supported"}}`},
		{`{"id":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request","data":"not a JSON-RPC 2.0 message"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"ping"}`, `{"jsonrpc":"2.0","id":4,"result":{}}`},
	} {
		if _, err := io.WriteString(stdin, c.send+"\n"); err != nil {
			t.Fatalf("write %s: %v", c.send, err)
		}
		if c.want == "-" { // a notification: no answer
			continue
		}
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("after %s: conch serve closed its output", c.send)
			}
			if c.want != "" && got != c.want {
				t.Errorf("%s: got %s, want %s", c.send, got, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer within 10s", c.send)
		}
	}
}
