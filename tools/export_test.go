//go:build linux

package tools

import "github.com/conch-dev/conch/shell"

// Internals the external tests reach.
var (
	CleanText  = cleanText
	HumanBytes = humanBytes
)

// RenderForegroundValue is RenderForeground with its structured value.
func RenderForegroundValue(r shell.Result, budget int) (string, ForegroundValue) {
	return renderForeground(r, budget)
}
