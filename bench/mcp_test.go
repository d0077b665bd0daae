//go:build linux

// Package bench measures conch end to end: the built binary as an MCP
// server on stdio, driven by the go-sdk client, against a bare bash spawn
// measured in the same run.
//
//	go test ./bench/ -run '^$' -bench . -benchtime 200x
package bench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conch-dev/conch/internal/testutil"
	"github.com/conch-dev/conch/tools"
)

// TestMain removes the conch binary the benchmarks built, or runs the
// floor server (BenchmarkEchoFloor) when the test binary is started as
// one.
func TestMain(m *testing.M) {
	if mode := os.Getenv(floorEnv); mode != "" {
		os.Exit(floorServer(mode))
	}
	testutil.VerifyTestMain(m)
}

// startServer runs `conch serve` on stdio and connects a client; both end
// with the benchmark.
func startServer(b *testing.B) (*mcp.ClientSession, int) {
	cmd := conchServe(b, conchBinary(b))
	return connect(b, cmd), cmd.Process.Pid
}

// conchBinary is the conch binary the benchmarks drive: the one
// $CONCH_BENCH_BINARY names (an older build, say), else this tree's.
func conchBinary(b *testing.B) string {
	if bin := os.Getenv("CONCH_BENCH_BINARY"); bin != "" {
		return bin
	}
	return testutil.ConchBinary(b)
}

// conchServe is `conch serve args...` with a temporary directory and
// state of the benchmark's own.
func conchServe(b *testing.B, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+b.TempDir(), "XDG_STATE_HOME="+b.TempDir())
	return cmd
}

// startConch is startServer with flags, for a benchmark that drives more
// than one server.
func startConch(b *testing.B, bin string, args ...string) *mcp.ClientSession {
	return connect(b, conchServe(b, bin, args...))
}

// connect starts cmd, an MCP server on stdio, and connects a client; both
// end with the benchmark.
func connect(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-bench", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, legacyMCP)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func call(b *testing.B, cs *mcp.ClientSession, command string) string {
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "bash",
		Arguments: map[string]any{"command": command, "description": "Benchmark a command"},
	})
	if err != nil {
		b.Fatal(err)
	}
	text := r.Content[0].(*mcp.TextContent).Text
	if r.IsError {
		b.Fatalf("%s: %s", command, text)
	}
	return text
}

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkEcho: one `echo hi` call through the MCP server per iteration,
// and one bare exec.Command("bash", "-c", "echo hi").Run() next to it.
// Reports both p50 latencies and their ratio (target: p50 < 3 ms, ratio
// ≤ 1.5).
func BenchmarkEcho(b *testing.B) {
	cs, _ := startServer(b)
	for range 20 { // warm up both paths
		call(b, cs, "echo hi")
		exec.Command("bash", "-c", "echo hi").Run()
	}
	var conch, bare []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if got := call(b, cs, "echo hi"); got != "hi\n" {
			b.Fatalf("echo hi: %q", got)
		}
		t1 := time.Now()
		if err := exec.Command("bash", "-c", "echo hi").Run(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		conch, bare = append(conch, t1.Sub(t0)), append(bare, t2.Sub(t1))
	}
	pc, pb := p50(conch), p50(bare)
	b.ReportMetric(ms(pc), "p50-ms")
	b.ReportMetric(ms(pb), "bare-p50-ms")
	b.ReportMetric(float64(pc)/float64(pb), "ratio")
}

// BenchmarkConcurrentSleep: 20 concurrent `sleep 0.5` calls on one
// session per iteration; reports the wall time of the batch (target
// < 700 ms: calls are not serialized).
func BenchmarkConcurrentSleep(b *testing.B) {
	cs, _ := startServer(b)
	var walls []time.Duration
	for b.Loop() {
		start := time.Now()
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if got := call(b, cs, "sleep 0.5"); got != "(no output)" {
					b.Errorf("sleep 0.5: %q", got)
				}
			})
		}
		wg.Wait()
		walls = append(walls, time.Since(start))
	}
	b.ReportMetric(ms(slices.Max(walls)), "max-wall-ms")
	b.ReportMetric(ms(p50(walls)), "p50-wall-ms")
}

// BenchmarkLargeOutput: a 50 MB output through a fresh server; reports
// the call's time (target < 500 ms) and the server's peak resident memory
// (VmHWM, target < 64 MiB).
func BenchmarkLargeOutput(b *testing.B) {
	cs, pid := startServer(b)
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		got := call(b, cs, `head -c 50000000 /dev/zero | tr '\0' a`)
		times = append(times, time.Since(start))
		// Its start and its end within the result budget, joined by the
		// line that counts the rest.
		head, rest, ok := strings.Cut(got, "\n[… ")
		_, tail, _ := strings.Cut(rest, "]\n")
		if !ok || len(got) > tools.DefaultMaxResultBytes || strings.Trim(head+tail, "a") != "" || len(tail) < 20000 {
			b.Fatalf("result: %d bytes, ends %q", len(got), got[max(0, len(got)-200):])
		}
	}
	b.ReportMetric(ms(slices.Max(times)), "max-ms")
	b.ReportMetric(float64(vmHWM(b, pid))/(1<<20), "server-hwm-MiB")
}

// vmHWM reads the peak resident set of pid, in bytes.
func vmHWM(b *testing.B, pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// legacyMCP pins a Go SDK client to MCP 2025-11-25, the revision with
// sessions this test was written for: the SDK offers 2026-07-28 first,
// which conch serves too (docs/transports.md#protocol-revisions).
var legacyMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
