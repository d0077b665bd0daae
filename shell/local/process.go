package local

import (
	"github.com/conch-dev/conch/internal/capture"
	"github.com/conch-dev/conch/shell"
)

func readStreams(stdout, stderr *capture.Stream) shell.ReadResult {
	var r shell.ReadResult
	var lossyOut, lossyErr bool
	r.Stdout, lossyOut = stdout.Next()
	r.Stderr, lossyErr = stderr.Next()
	if lossyOut || lossyErr {
		r.Lossy = true
		r.StdoutSpill = stdout.SpillPath()
		r.StderrSpill = stderr.SpillPath()
	}
	return r
}

// failedProcess is a background command whose bash could not be started:
// it is settled as killed, and its first read says why.
type failedProcess struct {
	stdout, stderr *capture.Stream
	done           chan struct{}
}

func newFailedProcess(e *Executor, err *shell.SpawnError) *failedProcess {
	p := &failedProcess{
		stdout: capture.NewStream(e.spill, "stdout", e.opts.MaxOutputBytes, e.opts.MaxSpillBytes),
		stderr: capture.NewStream(e.spill, "stderr", e.opts.MaxOutputBytes, e.opts.MaxSpillBytes),
		done:   make(chan struct{}),
	}
	p.stderr.Write([]byte(err.Error()))
	p.stdout.Close()
	p.stderr.Close()
	close(p.done)
	return p
}

func (p *failedProcess) Status() shell.Status            { return shell.StatusKilled }
func (p *failedProcess) ExitCode() *int                  { return nil }
func (p *failedProcess) Signal() string                  { return "" }
func (p *failedProcess) Done() <-chan struct{}           { return p.done }
func (p *failedProcess) Kill() bool                      { return false }
func (p *failedProcess) Read() shell.ReadResult          { return readStreams(p.stdout, p.stderr) }
func (p *failedProcess) Written() (stdout, stderr int64) { return p.stdout.Len(), p.stderr.Len() }
func (p *failedProcess) Result() shell.Result {
	return shell.Result{Stdout: p.stdout.Output(), Stderr: p.stderr.Output()}
}
