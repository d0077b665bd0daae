//go:build linux

package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/sshdtest"
	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/shell"
)

// denial is a Denial without its time, to compare.
type denial struct {
	Host   string
	Port   int
	Reason string
}

func (s *session) denials() []denial {
	var out []denial
	for _, d := range s.eg.Denials(s.since) {
		out = append(out, denial{d.Host, d.Port, d.Reason})
	}
	return out
}

func wantDenials(t *testing.T, s *session, want ...denial) {
	t.Helper()
	got := s.denials()
	if !slices.Equal(got, want) {
		t.Errorf("denials = %+v, want %+v", got, want)
	}
}

func hits(t *testing.T, a netip.Addr, port int) int {
	return netlab.Hits(t, netip.AddrPortFrom(a, uint16(port)))
}

// TestPublic runs, as root and as uid 65534, the cases of the default
// mode: a name and an address on the internet go through; the metadata
// address, a private address (by number and by a name that resolves to
// it) and the host's own address are refused, named, and never reached.
func TestPublic(t *testing.T) {
	netlab.Need(t)
	for _, unpriv := range []bool{false, true} {
		t.Run(map[bool]string{false: "root", true: "nobody"}[unpriv], func(t *testing.T) {
			if unpriv && !testutil.AsUnprivileged(t) {
				return
			}
			s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}})
			name := uniqueName(t, "api")
			netlab.SetHost(t, name, netlab.Public[0])
			if out, errOut, code := s.run(t, curl(name, netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.10" {
				t.Fatalf("by name: %d %q %q", code, out, errOut)
			}
			if out, errOut, code := s.run(t, curl("203.0.113.11", netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.11" {
				t.Fatalf("by number: %d %q %q", code, out, errOut)
			}
			wantDenials(t, s)
			inside := uniqueName(t, "intranet")
			netlab.SetHost(t, inside, netlab.Private)
			metaBefore, privBefore := hits(t, netlab.Metadata, netlab.HTTPPort), hits(t, netlab.Private, netlab.HTTPPort)
			for _, target := range []string{"169.254.169.254", "10.1.2.3", inside, netlab.Host.String()} {
				if out, errOut, code := s.run(t, curl(target, netlab.HTTPPort)); code == 0 || !strings.Contains(errOut, "Couldn't connect") {
					t.Errorf("%s: %d %q %q, want a refused connection", target, code, out, errOut)
				}
			}
			wantDenials(t, s,
				denial{"169.254.169.254", 80, netpolicy.ReasonMetadata},
				denial{"10.1.2.3", 80, netpolicy.ReasonPrivate},
				denial{inside, 80, netpolicy.ReasonPrivate},
				denial{"192.0.2.1", 80, netpolicy.ReasonHostOwn})
			if hits(t, netlab.Metadata, netlab.HTTPPort) != metaBefore || hits(t, netlab.Private, netlab.HTTPPort) != privBefore {
				t.Errorf("a refused destination was reached")
			}
		})
	}
}

// TestProtocols: HTTPS with the name checked against its certificate,
// raw TCP and UDP, and ssh to Debian's sshd, all by name.
func TestProtocols(t *testing.T) {
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}})
	name := uniqueName(t, "api")
	netlab.SetHost(t, name, netlab.Public[2])
	out, errOut, code := s.run(t, "curl -sS --max-time 20 --cacert "+netlab.CAFile()+" https://"+name+"/")
	if code != 0 || out != "hello from 203.0.113.12" {
		t.Errorf("https: %d %q %q", code, out, errOut)
	}
	out, errOut, code = s.run(t, "exec 3<>/dev/tcp/"+name+"/7; echo ping >&3; head -1 <&3")
	if code != 0 || out != "ping\n" {
		t.Errorf("tcp echo: %d %q %q", code, out, errOut)
	}
	out, errOut, code = s.run(t, `python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(20)
s.sendto(b"dgram", ("`+name+`", 7))
print(s.recv(100).decode())'`)
	if code != 0 || out != "dgram\n" {
		t.Errorf("udp echo: %d %q %q", code, out, errOut)
	}
	wantDenials(t, s)
}

// TestSSH: ssh by name to Debian's sshd, reached as if it were on the
// internet (the lab relays its address to the host's sshd).
func TestSSH(t *testing.T) {
	guard(t)
	srv := sshdtest.Start(t)
	relay := netip.AddrPortFrom(netlab.Public[5], 22)
	netlab.Relay(t, relay, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(srv.Port)))
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"git.example.test:22"}}})
	netlab.SetHost(t, "git.example.test", netlab.Public[5])
	out, errOut, code := s.run(t, "ssh -i "+srv.ClientKey+" -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "+
		sshdtest.User+"@git.example.test echo over ssh")
	if code != 0 || out != "over ssh\n" {
		t.Errorf("ssh: %d %q %q", code, out, errOut)
	}
	wantDenials(t, s)
}

// TestDeny: a deny pattern wins over the public mode, for every protocol,
// and names the pattern; the name is not looked up.
func TestDeny(t *testing.T) {
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public, Deny: []string{"*.denied.test", "203.0.113.13"}}})
	name := uniqueName(t, "x") + ".denied.test"
	netlab.SetHost(t, name, netlab.Public[0])
	before := hits(t, netlab.Public[0], netlab.HTTPPort)
	if _, errOut, code := s.run(t, curl(name, netlab.HTTPPort)); code == 0 {
		t.Errorf("denied name: %q", errOut)
	}
	if _, errOut, code := s.run(t, "exec 3<>/dev/tcp/"+name+"/7"); code == 0 {
		t.Errorf("denied name, raw tcp: %q", errOut)
	}
	if _, errOut, code := s.run(t, curl("203.0.113.13", netlab.HTTPPort)); code == 0 {
		t.Errorf("denied address: %q", errOut)
	}
	wantDenials(t, s,
		denial{name, 80, "denied by *.denied.test"},
		denial{name, 7, "denied by *.denied.test"},
		denial{"203.0.113.13", 80, "denied by 203.0.113.13"})
	if hits(t, netlab.Public[0], netlab.HTTPPort) != before {
		t.Errorf("a denied destination was reached")
	}
}

// TestRebinding: a name that resolved to an address on the internet and
// then to the metadata address is refused the second time.
func TestRebinding(t *testing.T) {
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"*.rebind.test"}}})
	name := uniqueName(t, "r") + ".rebind.test"
	netlab.SetHost(t, name, netlab.Public[4])
	if out, errOut, code := s.run(t, curl(name, netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.14" {
		t.Fatalf("first: %d %q %q", code, out, errOut)
	}
	netlab.SetHost(t, name, netlab.Metadata)
	before := hits(t, netlab.Metadata, netlab.HTTPPort)
	if out, errOut, code := s.run(t, curl(name, netlab.HTTPPort)); code == 0 {
		t.Fatalf("after rebinding: %d %q %q", code, out, errOut)
	}
	wantDenials(t, s, denial{name, 80, netpolicy.ReasonMetadata})
	if hits(t, netlab.Metadata, netlab.HTTPPort) != before {
		t.Errorf("the metadata address was reached")
	}
}

// asker answers network questions from a script and records them.
type asker struct {
	mu     sync.Mutex
	answer shell.NetworkAnswer
	asked  []string
}

func (a *asker) AskNetwork(ctx context.Context, host string, port int) (shell.NetworkAnswer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, net.JoinHostPort(host, strconv.Itoa(port)))
	return a.answer, nil
}

func (a *asker) set(v shell.NetworkAnswer) {
	a.mu.Lock()
	a.answer = v
	a.mu.Unlock()
}

func (a *asker) questions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.asked)
}

// TestAllowlist: only what allow names goes through; another destination
// asks the user, and the answer holds: for the session, once, or no for
// the session; without anyone to ask it is refused.
func TestAllowlist(t *testing.T) {
	a := &asker{}
	var lent shell.NetworkAsker
	var mu sync.Mutex
	s := start(t, egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Allowlist, Allow: []string{"listed.test"}},
		Asker: func() shell.NetworkAsker { mu.Lock(); defer mu.Unlock(); return lent }})
	netlab.SetHost(t, "listed.test", netlab.Public[0])
	for _, n := range []string{"once.test", "session.test", "no.test", "nobody.test"} {
		netlab.SetHost(t, n, netlab.Public[1])
	}
	if out, _, code := s.run(t, curl("listed.test", netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.10" {
		t.Fatalf("listed: %d %q", code, out)
	}
	if _, _, code := s.run(t, curl("nobody.test", netlab.HTTPPort)); code == 0 {
		t.Errorf("unlisted with no one to ask went through")
	}
	mu.Lock()
	lent = a
	mu.Unlock()
	a.set(shell.NetworkAllowOnce)
	for range 2 {
		if out, _, code := s.run(t, curl("once.test", netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.11" {
			t.Errorf("allowed once: %d %q", code, out)
		}
	}
	a.set(shell.NetworkAllowSession)
	for range 2 {
		if out, _, code := s.run(t, curl("session.test", netlab.HTTPPort)); code != 0 || out != "hello from 203.0.113.11" {
			t.Errorf("allowed for the session: %d %q", code, out)
		}
	}
	a.set(shell.NetworkDeny)
	for range 2 {
		if _, _, code := s.run(t, curl("no.test", netlab.HTTPPort)); code == 0 {
			t.Errorf("declined went through")
		}
	}
	if _, _, code := s.run(t, curl("203.0.113.15", netlab.HTTPPort)); code == 0 {
		t.Errorf("a declined address went through")
	}
	if got, want := a.questions(), []string{"once.test:80", "once.test:80", "session.test:80", "no.test:80", "203.0.113.15:80"}; !slices.Equal(got, want) {
		t.Errorf("questions %q, want %q", got, want)
	}
	wantDenials(t, s,
		denial{"nobody.test", 80, netpolicy.ReasonNotAllowed},
		denial{"no.test", 80, netpolicy.ReasonDeclined},
		denial{"no.test", 80, netpolicy.ReasonDeclined},
		denial{"203.0.113.15", 80, netpolicy.ReasonDeclined})
}

// TestLoopback: allow_local opens the one port it names on the session's
// loopback, forwarded to the host's; conch's own port is refused there
// and on the host's address, whatever allow_local says.
func TestLoopback(t *testing.T) {
	guard(t)
	db := listenCounting(t, netip.MustParseAddr("127.0.0.1"))
	other := listenCounting(t, netip.MustParseAddr("127.0.0.1"))
	own := listenCounting(t, netip.IPv4Unspecified())
	ownAP := netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(own.port))
	dbAP := "127.0.0.1:" + strconv.Itoa(db.port)
	ownLoop := "127.0.0.1:" + strconv.Itoa(own.port)
	pol := netpolicy.Policy{Mode: netpolicy.Public, AllowLocal: []string{dbAP, ownLoop}, Own: []netip.AddrPort{ownAP}}
	s := start(t, egress.Options{Policy: pol}, dbAP, ownLoop, "[::1]:"+strconv.Itoa(own.port))
	if _, errOut, code := s.run(t, "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(db.port)+" && head -c1 <&3"); code != 0 {
		t.Errorf("allow_local: %d %q", code, errOut)
	}
	testutil.WaitFor(t, testTimeout, "the host's loopback server gets the connection", func() bool { return db.count() == 1 })
	if _, _, code := s.run(t, "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(other.port)); code == 0 {
		t.Errorf("a port allow_local does not name was reached")
	}
	for _, target := range []string{"127.0.0.1", netlab.Host.String()} {
		if _, _, code := s.run(t, "exec 3<>/dev/tcp/"+target+"/"+strconv.Itoa(own.port)+" && head -c1 <&3"); code == 0 {
			t.Errorf("conch's own port on %s was reached", target)
		}
	}
	if other.count() != 0 || own.count() != 0 {
		t.Errorf("connections arrived where none may: other %d, own %d", other.count(), own.count())
	}
	wantDenials(t, s,
		denial{"127.0.0.1", own.port, egress.ReasonOwnServer},
		denial{netlab.Host.String(), own.port, egress.ReasonOwnServer})
}

// TestPrepareUnattached: a stack prepared for a session whose init never
// came (its start failed) closes without a device and leaves no
// goroutine; one given no device (an init that made none) fails and
// closes the listeners it was given; a policy that is not filtered is
// refused before any stack.
func TestPrepareUnattached(t *testing.T) {
	defer testutil.VerifyNoLeaks(t)
	public := &egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}}
	eg, err := egress.Prepare(public)
	if err != nil {
		t.Fatal(err)
	}
	if err := eg.Close(); err != nil {
		t.Errorf("Close of a prepared session: %v", err)
	}
	if eg, err = egress.Prepare(public); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := eg.Attach(nil, map[string]*os.File{"127.0.0.1:1": r}); err == nil || !strings.Contains(err.Error(), "made no device") {
		t.Errorf("Attach without a device: %v, want made no device", err)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the listener given to a failed Attach: read %v, want it closed", err)
	}
	if _, err := egress.Prepare(&egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.On}}); err == nil || !strings.Contains(err.Error(), "not a filtered mode") {
		t.Errorf("Prepare with mode on: %v, want not a filtered mode", err)
	}
}
