//go:build linux

package bench

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// floorEnv makes the test binary the floor server instead of running the
// benchmarks: "spawn" runs each call's command with exec.Command, "none"
// answers without spawning.
const floorEnv = "CONCH_BENCH_FLOOR_SERVER"

type floorArgs struct {
	Command     string `json:"command"`
	Description string `json:"description,omitempty"`
}

// floorServer is the least an MCP server on the same Go SDK does for a
// `bash` call: decode the arguments, run `bash -c` as a direct child (or
// nothing) and answer its output as text.
func floorServer(mode string) int {
	s := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "bash", Description: "Run a command"}, func(ctx context.Context, _ *mcp.CallToolRequest, a floorArgs) (*mcp.CallToolResult, any, error) {
		out := []byte("hi\n")
		if mode == "spawn" {
			var err error
			if out, err = exec.CommandContext(ctx, "bash", "-c", a.Command).Output(); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// benchPause is $CONCH_BENCH_PAUSE_MS, an idle pause after every call
// and spawn (default 0, back to back), for an agent's pace: a server's
// work between calls (conch's warm shell, docs/executor.md#warm-shells)
// then falls in no measurement.
func benchPause(b *testing.B) time.Duration {
	v := os.Getenv("CONCH_BENCH_PAUSE_MS")
	if v == "" {
		return 0
	}
	ms, err := strconv.Atoi(v)
	if err != nil || ms < 0 {
		b.Fatalf("CONCH_BENCH_PAUSE_MS=%q: want a number of milliseconds", v)
	}
	return time.Duration(ms) * time.Millisecond
}

// startFloor runs the floor server in mode on stdio and connects a client.
func startFloor(b *testing.B, mode string) *mcp.ClientSession {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), floorEnv+"="+mode)
	return connect(b, cmd)
}

// BenchmarkEchoFloor splits a contained `echo hi` call's cost against a
// bare spawn into what any Go SDK server pays and what conch adds: per
// iteration, interleaved, one call each to conch on the defaults, conch
// with --containment off, a minimal server on the same SDK that spawns
// `bash -c` (floor-spawn) and the same server answering without a spawn
// (floor-none: the transport and both SDKs alone), then a bare spawn.
// Reports each p50 and each server's ratio to the bare spawn.
func BenchmarkEchoFloor(b *testing.B) {
	bin := conchBinary(b)
	servers := []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"conch", startConch(b, bin)},
		{"conch-off", startConch(b, bin, "--containment", "off")},
		{"floor-spawn", startFloor(b, "spawn")},
		{"floor-none", startFloor(b, "none")},
	}
	for range 20 { // warm up every path
		for _, s := range servers {
			call(b, s.cs, "echo hi")
		}
		exec.Command("bash", "-c", "echo hi").Run()
	}
	took := make([][]time.Duration, len(servers))
	var bare []time.Duration
	pause := benchPause(b)
	for b.Loop() {
		for i, s := range servers {
			t0 := time.Now()
			if got := call(b, s.cs, "echo hi"); got != "hi\n" {
				b.Fatalf("%s: echo hi: %q", s.name, got)
			}
			took[i] = append(took[i], time.Since(t0))
			time.Sleep(pause)
		}
		t0 := time.Now()
		if err := exec.Command("bash", "-c", "echo hi").Run(); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t0))
		time.Sleep(pause)
	}
	pb := p50(bare)
	b.ReportMetric(ms(pb), "bare-p50-ms")
	for i, s := range servers {
		p := p50(took[i])
		b.ReportMetric(ms(p), s.name+"-p50-ms")
		if s.name != "floor-none" {
			b.ReportMetric(float64(p)/float64(pb), s.name+"-ratio")
		}
	}
}
