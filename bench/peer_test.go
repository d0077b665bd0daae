//go:build linux

package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/conch-dev/conch/internal/testutil"
)

// BenchmarkPeerEcho: the official TypeScript MCP client drives conch
// serve on its defaults, conch serve with containment and the sandbox
// off, and the peer mcp-server-commands (pinned in peer/package.json),
// `echo hi` over stdio, interleaved in one run (peer/echo.mjs). Reports
// each p50 and conch's ratio to the peer (target: ≤ 0.8 on the
// defaults). b.N is the number of rounds: run it with -benchtime 200x.
// The first run installs the peer from npm (peer/node_modules).
func BenchmarkPeerEcho(b *testing.B) {
	if _, err := testutil.NPMFixture("peer"); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("node", "peer/echo.mjs", testutil.ConchBinary(b), strconv.Itoa(max(b.N, 20)))
	cmd.Env = append(os.Environ(), "TMPDIR="+b.TempDir(), "XDG_STATE_HOME="+b.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("node peer/echo.mjs: %v", err)
	}
	var got map[string]struct{ P50, P90 float64 }
	if err := json.Unmarshal(out, &got); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	for b.Loop() { // the rounds ran in node; b.N only sized them
	}
	conch, off, peer := got["conch"], got["conch-containment-off"], got["mcp-server-commands"]
	b.ReportMetric(conch.P50, "conch-p50-ms")
	b.ReportMetric(off.P50, "conch-off-p50-ms")
	b.ReportMetric(peer.P50, "peer-p50-ms")
	b.ReportMetric(conch.P50/peer.P50, "ratio")
	b.ReportMetric(off.P50/peer.P50, "off-ratio")
}
