package shell

import (
	"sync"
	"sync/atomic"
)

// FailedProcess is a Process whose command never started, for providers
// that learn of a spawn failure only after Start returned (a remote host
// that refuses the session, say). It is settled as StatusKilled with no
// exit code and no signal, and its first Read carries
// "spawn failed: <err>" in its stderr part, once.
func FailedProcess(err error) Process {
	p := &failedProcess{msg: (&SpawnError{Err: err}).Error(), done: make(chan struct{})}
	close(p.done)
	return p
}

type failedProcess struct {
	msg  string
	done chan struct{}
	once sync.Once
	read atomic.Bool // the first Read has taken msg
}

func (p *failedProcess) Status() Status          { return StatusKilled }
func (p *failedProcess) ExitCode() *int          { return nil }
func (p *failedProcess) Signal() string          { return "" }
func (p *failedProcess) Done() <-chan struct{}   { return p.done }
func (p *failedProcess) Kill() bool              { return false }
func (p *failedProcess) Written() (int64, int64) { return 0, int64(len(p.msg)) }

func (p *failedProcess) Read() ReadResult {
	var r ReadResult
	p.once.Do(func() {
		r.Stderr = p.msg
		p.read.Store(true)
	})
	return r
}

// Peek shows the spawn failure until the first Read has taken it.
func (p *failedProcess) Peek(maxBytes int) ReadResult {
	var r ReadResult
	if !p.read.Load() {
		r.Stderr = p.msg[max(0, len(p.msg)-maxBytes):]
	}
	return r
}

func (p *failedProcess) Result() Result {
	return Result{Stderr: Output{Text: p.msg}}
}
