//go:build linux

package agent_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// Every fact of an Output and a ReadResult survives the wire.
func TestRoundTrip(t *testing.T) {
	o := shell.Output{Text: "tail\x00é", Truncated: true, Head: "head", Size: 1 << 40, Lines: 7,
		SpillErr: &shell.SpillCapError{Cap: 64 << 20}}
	var buf bytes.Buffer
	c := agent.NewConn(&buf, &buf)
	if err := c.Write(agent.EncodeOutput(o)); err != nil {
		t.Fatal(err)
	}
	var w agent.Output
	if err := c.Read(&w); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, w.Output()); diff != "" {
		t.Errorf("output (-sent +got):\n%s", diff)
	}
	r := shell.ReadResult{Stdout: "a", Stderr: "b", Lossy: true, StdoutSpill: "/s/o", StderrSpill: "",
		StdoutSkipped: shell.Omission{Bytes: 10, Lines: 2}, StderrSkipped: shell.Omission{Bytes: 3},
		StderrSpillErr: errors.New("disk full")}
	if err := c.Write(agent.EncodeRead(r)); err != nil {
		t.Fatal(err)
	}
	var wr agent.Read
	if err := c.Read(&wr); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, wr.ReadResult(), cmp.Comparer(func(a, b error) bool {
		return (a == nil) == (b == nil) && (a == nil || a.Error() == b.Error())
	})); diff != "" {
		t.Errorf("read (-sent +got):\n%s", diff)
	}
}

// The seam's typed errors come back as the same types.
func TestErrorsKeepTheirType(t *testing.T) {
	we := agent.EncodeError(&shell.WorkdirError{Path: "/x", Err: syscall.ENOENT}).Err()
	var w *shell.WorkdirError
	if !errors.As(we, &w) || w.Path != "/x" || !errors.Is(we, fs.ErrNotExist) {
		t.Errorf("workdir error: %v", we)
	}
	if re := agent.EncodeError(&shell.RequestError{Field: "Timeout", Reason: "r"}).Err(); re.Error() != "shell: invalid request: Timeout r" {
		t.Errorf("request error: %v", re)
	}
	if ce := agent.EncodeError(shell.ErrClosed).Err(); !errors.Is(ce, shell.ErrClosed) {
		t.Errorf("closed: %v", ce)
	}
}

func TestFrameBounds(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], agent.MaxFrame+1)
	c := agent.NewConn(bytes.NewReader(hdr[:]), io.Discard)
	var v agent.Request
	if err := c.Read(&v); !errors.Is(err, agent.ErrFrameTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
	if err := agent.NewConn(nil, io.Discard).Write(agent.StartArgs{Stdin: make([]byte, agent.MaxFrame)}); !errors.Is(err, agent.ErrFrameTooLarge) {
		t.Errorf("oversized write: %v", err)
	}
	c = agent.NewConn(bytes.NewReader([]byte{0, 0, 0, 9, '{'}), io.Discard)
	if err := c.Read(&v); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut frame: %v", err)
	}
}

// A client of another version is refused with an answer, and the agent
// ends; so does an agent whose input ends, killing what it started.
func TestServeVersionAndEOF(t *testing.T) {
	marker := testutil.Marker(t)
	newEx := func() *local.Executor {
		ex, err := local.New(&local.Options{SpillParent: t.TempDir(), Grace: 300e6,
			Environ: append(os.Environ(), testutil.MarkerEnv+"="+marker)})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	client, server := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- agent.Serve(server, server, newEx(), agent.Hello{}) }()
	c := agent.NewConn(client, client)
	c.Write(agent.Request{ID: 1, Op: agent.OpHello, Version: agent.Version + 1})
	var resp agent.Response
	if err := c.Read(&resp); err != nil || resp.Err == nil || resp.Err.Kind != agent.ErrKindVersion {
		t.Errorf("hello of version %d: %+v %v", agent.Version+1, resp, err)
	}
	if err := <-served; err == nil {
		t.Error("Serve returned nil after a version mismatch")
	}
	client.Close()
	server.Close()

	client, server = net.Pipe()
	go func() { served <- agent.Serve(server, server, newEx(), agent.Hello{Conch: "v"}) }()
	c = agent.NewConn(client, client)
	c.Write(agent.Request{ID: 1, Op: agent.OpHello, Version: agent.Version})
	resp = agent.Response{}
	if err := c.Read(&resp); err != nil || resp.Hello == nil || resp.Hello.Version != agent.Version || resp.Hello.Conch != "v" {
		t.Fatalf("hello: %+v %v", resp, err)
	}
	c.Write(agent.Request{ID: 2, Op: agent.OpStart, Proc: 1, Start: &agent.StartArgs{Background: true, Command: "sleep 30"}})
	resp = agent.Response{}
	if err := c.Read(&resp); err != nil || resp.ID != 2 || resp.Err != nil {
		t.Fatalf("start: %+v %v", resp.Err, err)
	}
	// Looked at until it shows: a process in the middle of its exec
	// shows no marker for a moment (it failed so beside CPU burners).
	testutil.WaitFor(t, 5*time.Second, "the command to run", func() bool { return len(testutil.Processes(marker)) == 1 })
	// The agent answers its done notification into the pipe as it ends;
	// keep reading so that it is not blocked.
	go io.Copy(io.Discard, client)
	client.Close()
	if err := <-served; err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("Serve after its input ended: %v", err)
	}
	server.Close()
	testutil.AssertNoProcesses(t, marker)
}
