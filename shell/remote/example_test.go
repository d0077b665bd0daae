//go:build linux

package remote_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os/exec"

	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
)

// agentConn is the stdin and stdout of a `conch agent` started over ssh.
type agentConn struct {
	io.WriteCloser
	io.Reader
	cmd *exec.Cmd
}

// Close ends the agent's input (it then kills what it started) and waits
// for ssh.
func (c agentConn) Close() error {
	c.WriteCloser.Close()
	return c.cmd.Wait()
}

// An executor for another host: each connection is a `conch agent` the
// Dialer starts there (package sshhost does this over SSH, deploying the
// agent first). It is used like any other executor of the shell seam.
func Example() {
	dial := remote.DialFunc(func(context.Context) (io.ReadWriteCloser, error) {
		cmd := exec.Command("ssh", "build-host", "conch", "agent")
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return agentConn{in, out, cmd}, nil
	})
	ex, err := remote.New("build-host", dial, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()

	spec, err := ex.Resolve(shell.Request{Command: "uname -n"})
	if err != nil {
		log.Fatal(err)
	}
	p, err := ex.Launch(spec)
	if err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	fmt.Print(p.Result().Stdout.Text)
}
