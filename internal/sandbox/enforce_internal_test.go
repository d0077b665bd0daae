//go:build linux

package sandbox

import (
	"fmt"
	"strings"
	"testing"
)

// TestLandlockRulesRefer: the writable directories get REFER from ABI 2
// on, and never below it, where a best-effort ruleset asking for it
// would drop Landlock altogether.
func TestLandlockRulesRefer(t *testing.T) {
	for abi, want := range map[int]bool{0: false, 1: false, 2: true, 7: true} {
		rw := fmt.Sprint(landlockRules(abi, []string{"/w"})[1])
		if !strings.Contains(rw, "/w") {
			t.Fatalf("rule 1 is not the writable one: %s", rw)
		}
		if got := strings.Contains(rw, "refer"); got != want {
			t.Errorf("ABI %d: writable rule %s; REFER wanted: %v", abi, rw, want)
		}
	}
}
