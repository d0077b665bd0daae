//go:build !linux

package capture

import (
	"fmt"
	"os"
)

func runHelper(name string) int {
	fmt.Fprintf(os.Stderr, "no helper %q on this system\n", name)
	return 2
}
