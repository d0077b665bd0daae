//go:build linux

package local_test

import (
	"context"
	"fmt"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// A local executor runs one command in the foreground: Resolve fills the
// defaults, shell.Run waits for the command, and Close kills whatever is
// left.
func Example() {
	ex, err := local.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ex.Close()
	spec, err := ex.Resolve(shell.Request{Command: "echo hello; exit 3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := shell.Run(context.Background(), ex, spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q exit %d\n", res.Stdout.Text, *res.ExitCode)
	// Output: "hello\n" exit 3
}
