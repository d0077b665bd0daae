//go:build linux

package egress_test

import (
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conch-dev/conch/internal/egress"
	"github.com/conch-dev/conch/internal/netlab"
	"github.com/conch-dev/conch/internal/netpolicy"
	"github.com/conch-dev/conch/internal/nsinit"
)

// The benchmarks compare a session's network through the policy with the
// host's (the test's own namespace, which reaches the lab's internet
// directly), in the same run: run them with
// go test -run '^$' -bench Egress -benchtime 1x ./internal/egress/

// connectScript connects to the lab's HTTP server n times and prints the
// median time of a connect (the handshake, which the policy holds until
// it has decided and connected upstream) in microseconds.
const connectScript = `
import socket, sys, time
host, n = sys.argv[1], int(sys.argv[2])
ts = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection((host, 80))
    ts.append(time.perf_counter() - t)
    s.close()
ts.sort()
print(int(ts[len(ts)//2] * 1e6))
`

func benchSession(b *testing.B) *session {
	b.Helper()
	netlab.Need(b)
	in, err := nsinit.Start(&nsinit.Options{
		Env: []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr,
		Network: &nsinit.Network{TUN: true, Resolv: egress.ResolvConf("/etc/resolv.conf")},
	})
	if err != nil {
		b.Fatal(err)
	}
	n := in.TakeNetwork()
	eg, err := egress.New(n.TUN, n.Listeners, &egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}})
	if err != nil {
		in.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); eg.Close() })
	return &session{in: in, eg: eg, since: time.Now()}
}

// hostRun runs line with bash in the test's own namespace.
func hostRun(b *testing.B, line string) string {
	out, err := exec.Command("bash", "-c", line).Output()
	if err != nil {
		b.Fatalf("%s: %v", line, err)
	}
	return string(out)
}

func micros(b *testing.B, s string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		b.Fatalf("%q: %v", s, err)
	}
	return v
}

// BenchmarkEgressConnect reports the median connect time through the
// policy (by name and by address) and on the host, and what the policy
// adds.
func BenchmarkEgressConnect(b *testing.B) {
	s := benchSession(b)
	netlab.SetHost(b, "bench.example.test", netlab.Public[0])
	const n = 300
	script := "python3 -c '" + connectScript + "' "
	for range b.N {
		host := micros(b, hostRun(b, script+"203.0.113.10 "+strconv.Itoa(n)))
		byAddr := micros(b, runB(b, s, script+"203.0.113.10 "+strconv.Itoa(n)))
		byName := micros(b, runB(b, s, script+"bench.example.test "+strconv.Itoa(n)))
		b.ReportMetric(host, "host-µs")
		b.ReportMetric(byAddr, "policy-addr-µs")
		b.ReportMetric(byName, "policy-name-µs")
		b.ReportMetric(byAddr-host, "added-µs")
	}
}

// BenchmarkEgressThroughput reports a 100 MB download's speed through the
// policy and on the host (curl from the lab's HTTP server), and their
// ratio.
func BenchmarkEgressThroughput(b *testing.B) {
	s := benchSession(b)
	const line = "curl -sS -o /dev/null -w '%{speed_download}' http://203.0.113.10/bytes/104857600"
	for range b.N {
		var host, policy []float64
		for range 3 { // interleaved; the medians are reported
			host = append(host, micros(b, hostRun(b, line)))
			policy = append(policy, micros(b, runB(b, s, line)))
		}
		h, p := median(host), median(policy)
		b.ReportMetric(h/1e6, "host-MB/s")
		b.ReportMetric(p/1e6, "policy-MB/s")
		b.ReportMetric(p/h, "ratio")
	}
}

// BenchmarkEgressSession reports what a session's network costs: the
// init's start with and without it, and the server's heap per session
// (a stack on its device, idle).
func BenchmarkEgressSession(b *testing.B) {
	netlab.Need(b)
	start := func(network bool) time.Duration {
		o := &nsinit.Options{Env: []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0"}, Stderr: os.Stderr}
		if network {
			o.Network = &nsinit.Network{TUN: true, Resolv: egress.ResolvConf("/etc/resolv.conf")}
		}
		t0 := time.Now()
		in, err := nsinit.Start(o)
		if err != nil {
			b.Fatal(err)
		}
		n := in.TakeNetwork()
		var eg *egress.Session
		if network {
			if eg, err = egress.New(n.TUN, n.Listeners, &egress.Options{Policy: netpolicy.Policy{Mode: netpolicy.Public}}); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(t0)
		in.Close()
		if eg != nil {
			eg.Close()
		}
		return d
	}
	for range b.N {
		var plain, withNet []float64
		for range 20 {
			plain = append(plain, float64(start(false).Microseconds()))
			withNet = append(withNet, float64(start(true).Microseconds()))
		}
		b.ReportMetric(median(plain)/1e3, "init-ms")
		b.ReportMetric(median(withNet)/1e3, "init+net-ms")
		// The heap of 20 idle sessions.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var keep []*session
		for range 20 {
			keep = append(keep, benchSession(b))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/20/1024, "heap-KiB/session")
		for _, s := range keep {
			s.in.Close()
			s.eg.Close()
		}
	}
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

// runB runs line in the session and returns its stdout; it must succeed.
func runB(b *testing.B, s *session, line string) string {
	out, errOut, code := s.run(b, line)
	if code != 0 {
		b.Fatalf("%s: exit %d: %s", line, code, errOut)
	}
	return out
}
