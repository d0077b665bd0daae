//go:build !linux

package main

// hostLines are conch doctor's findings about the kernel: containment and
// the sandbox are Linux features.
func hostLines() [][2]string {
	return [][2]string{
		{"containment", "none (needs Linux)"},
		{"sandbox", "none (needs Linux)"},
	}
}
