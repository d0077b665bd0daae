//go:build linux

package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond every 5 ms until it holds, and fails t (Fatal) if it
// still does not after d. what names the awaited state in the failure.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
