//go:build linux

package shell_test

import (
	"fmt"
	"time"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/local"
)

// A background process is read incrementally while it runs, and killed
// as a group.
func Example_background() {
	ex, err := local.New(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ex.Close()
	spec, err := ex.Resolve(shell.Request{Command: "echo started; sleep 600"})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := ex.Start(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	var out string
	for out == "" {
		out = p.Read().Stdout
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("%q\n", out)
	p.Kill()
	<-p.Done()
	fmt.Println(p.Status(), p.Signal())
	// Output:
	// "started\n"
	// killed SIGTERM
}
