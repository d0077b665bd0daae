//go:build !linux

package main

// hostLines are conch doctor's findings about the kernel: containment and
// the sandbox are Linux features, so c's executor enforces neither; ok is
// false when c requires them. enf is what the executor enforced.
func hostLines(c *config) (lines [][2]string, enf enforcement, ok bool) {
	enf, ok = enforcementOf(c)
	return [][2]string{{"containment", enf.containment}, {"sandbox", enf.sandbox}}, enf, ok
}
