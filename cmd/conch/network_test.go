//go:build linux

package main

import (
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// TestOwnServerRefused: a command of conch serve --http cannot connect to
// the server's own port, on its loopback or on the host's own address,
// under the default network policy; it gets the marker of its own
// server. (As uid 65534 on a host whose TUN device only root may open,
// the default degrades to on, and the port is reachable: the
// description says so; internal/egress tests that case with a usable
// device.)
func TestOwnServerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the network policy needs a TUN device this user may open")
	}
	t.Parallel()
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	const token = "own-server-secret"
	srv := startHTTPServe(t, marker, "0.0.0.0:0", "CONCH_TOKEN="+token)
	_, port, err := net.SplitHostPort(srv.listen())
	if err != nil {
		t.Fatal(err)
	}
	c := rawHTTP{t: t, url: "http://127.0.0.1:" + port + "/mcp", token: token}
	resp, body := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || c.session == "" {
		t.Fatalf("initialize: %s %q", resp.Status, body)
	}
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	targets := []string{"127.0.0.1"}
	if ifas, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifas {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				targets = append(targets, ipn.IP.String()) // the host's own address
				break
			}
		}
	}
	for _, target := range targets {
		cmd := "exec 3<>/dev/tcp/" + target + "/" + port + " && printf 'GET / HTTP/1.0\\\\r\\\\n\\\\r\\\\n' >&3 && head -c 12 <&3 && echo reached; echo done"
		_, body := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"` + cmd + `","description":"x"}}}`)
		if strings.Contains(body, "reached") || !strings.Contains(body, "[sandbox: connection to conch's own server refused]") {
			t.Errorf("connect to %s:%s from a command: %s\nwant it refused with the marker", target, port, body)
		}
	}
	srv.stop()
}

// TestNetworkUnavailable: as uid 65534 on a host whose TUN device only
// root may open (these machines ship it 0600), a filtered mode given
// explicitly refuses to start naming the cause, and the default
// degrades to on and says so in the log; where any user may open it
// (Debian's 0666), both run under the policy.
func TestNetworkUnavailable(t *testing.T) {
	t.Parallel()
	fi, err := os.Stat("/dev/net/tun")
	if err != nil {
		t.Skipf("no TUN device: %v", err)
	}
	open := fi.Mode().Perm()&0o006 == 0o006
	marker := testutil.Marker(t)
	defer testutil.AssertNoProcesses(t, marker)
	run := func(args ...string) (string, string, int) {
		cmd := unprivConch(t, marker, append([]string{"run"}, args...)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.Run()
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}
	out, errOut, code := run("--network", "public", "--", "echo ran")
	if open {
		if code != 0 || out != "ran\n" {
			t.Errorf("given public, device 0666: exit %d, %q %q", code, out, errOut)
		}
	} else if want := "conch run: network public: this host cannot enforce it: /dev/net/tun is mode 0600: only its owner may open it (Debian's default is 0666): open /dev/net/tun: permission denied\n"; code != 2 || errOut != want || out != "" {
		t.Errorf("given public, device %v: exit %d, stdout %q, stderr %q; want 2 and %q", fi.Mode().Perm(), code, out, errOut, want)
	}
	out, errOut, code = run("--log-level", "warn", "--", "echo ran")
	degraded := strings.Contains(errOut, `msg="network policy unavailable: commands reach the host's network as it is, conch's own server port included" mode=public cause="/dev/net/tun is mode 0600`)
	if code != 0 || out != "ran\n" || degraded == open {
		t.Errorf("the default, device %v: exit %d, stdout %q, stderr %q; want it to run, degraded %v", fi.Mode().Perm(), code, out, errOut, !open)
	}
}
