//go:build linux

package proc

import "testing"

// TestLoopCount: a scan without traces counts its live processes; traces
// at every scan up to the last count a loop as one beside the fewest live
// processes a scan saw, a loop beside a sleep included (counted as none
// before, when no scan saw the loop alive: once in CI).
func TestLoopCount(t *testing.T) {
	type scan struct{ live, traces int }
	for _, tc := range []struct {
		name  string
		scans []scan
		want  int
	}{
		{"nothing", []scan{{0, 0}}, 0},
		{"a server", []scan{{1, 0}}, 1},
		{"a child that just exited, beside a server", []scan{{1, 1}, {1, 0}}, 1},
		{"a loop alone", []scan{{0, 2}, {0, 3}, {0, 1}, {0, 2}}, 1},
		{"a loop beside a sleep", []scan{{1, 2}, {1, 1}, {1, 3}, {1, 1}}, 2},
		{"a loop seen alive at times, beside a sleep", []scan{{2, 1}, {1, 2}, {2, 1}, {2, 2}}, 2},
		{"a loop that stopped", []scan{{0, 1}, {0, 0}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c LoopCount
			for i, s := range tc.scans {
				got, done := c.Scan(s.live, s.traces, i == len(tc.scans)-1)
				if done != (i == len(tc.scans)-1) {
					t.Fatalf("scan %d: done %v", i, done)
				}
				if done && got != tc.want {
					t.Errorf("count %d, want %d", got, tc.want)
				}
			}
		})
	}
}
