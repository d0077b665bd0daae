//go:build linux

package egress_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/nsinit"
	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/internal/testutil"
)

const helperEnv = "EGRESS_TEST_INIT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(nsinit.Main())
	}
	if code, done := netlab.Enter(); done {
		os.Exit(code)
	}
	if err := proc.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testutil.VerifyTestMain(m)
}

// session is an init with a network namespace of its own served by an
// egress.Session.
type session struct {
	in    *nsinit.Init
	eg    *egress.Session
	since time.Time
}

// testTimeout bounds a wait for an event.
const testTimeout = 30 * time.Second

var nameSeq atomic.Int64

// uniqueName is a name no other test (nor a run as uid 65534) uses.
func uniqueName(t *testing.T, prefix string) string {
	return prefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(nameSeq.Add(1), 10) + ".example.test"
}

// start starts an init whose network goes through an egress session of
// pol, with loopback listeners for listen (allow_local's and own's).
func start(t *testing.T, opts egress.Options, listen ...string) *session {
	t.Helper()
	marker := guard(t)
	in, err := nsinit.Start(&nsinit.Options{
		Env:     []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0", marker},
		Stderr:  os.Stderr,
		Network: &nsinit.Network{TUN: true, Listen: listen, Resolv: egress.ResolvConf("/etc/resolv.conf")},
	})
	if err != nil {
		t.Fatalf("nsinit.Start: %v", err)
	}
	n := in.TakeNetwork()
	eg, err := egress.New(n.TUN, n.Listeners, &opts)
	if err != nil {
		in.Close()
		t.Fatalf("egress.New: %v", err)
	}
	t.Cleanup(func() {
		in.Close()
		eg.Close()
	})
	return &session{in: in, eg: eg, since: time.Now()}
}

// guard registers, first, the checks every test ends with: nothing
// carrying the returned marker survives, no goroutine leaked. It runs
// once per test.
func guard(t *testing.T) string {
	t.Helper()
	netlab.Need(t)
	if m, ok := guarded.Load(t); ok {
		return m.(string)
	}
	marker := testutil.Marker(t)
	guarded.Store(t, marker)
	t.Cleanup(func() {
		guarded.Delete(t)
		testutil.AssertNoProcesses(t, marker)
		testutil.VerifyNoLeaks(t)
	})
	return marker
}

var guarded sync.Map

// run runs line with bash in the session's init and returns its output
// and exit code.
func (s *session) run(t testing.TB, line string) (stdout, stderr string, code int) {
	t.Helper()
	var outs [2]bytes.Buffer
	var files [2]*os.File
	var wg sync.WaitGroup
	for k := range files {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		files[k] = w
		wg.Go(func() {
			io.Copy(&outs[k], r)
			r.Close()
		})
	}
	ch, err := s.in.Spawn(nsinit.Command{Path: "/bin/bash", Args: []string{"bash", "-c", line},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C"}, Dir: "/", Stdout: files[0], Stderr: files[1]})
	files[0].Close()
	files[1].Close()
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	ws, err := ch.Wait()
	ch.KillLeftovers()
	ch.Release()
	wg.Wait()
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return outs[0].String(), outs[1].String(), ws.ExitStatus()
}

// httpServer serves text on addr:0 in the lab; it returns the port.
func httpServer(t *testing.T, addr netip.Addr, text string) int {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, text)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return ln.Addr().(*net.TCPAddr).Port
}

// counter listens on addr:0 and counts the connections it accepts: a
// refused destination must never see one.
type counter struct {
	mu   sync.Mutex
	n    int
	port int
}

func listenCounting(t *testing.T, addr netip.Addr) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{port: ln.Addr().(*net.TCPAddr).Port}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return c
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func curl(host string, port int) string {
	return "curl -sS --max-time 20 http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/"
}
