package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/conch-dev/conch/shell"
)

// Serve answers the Requests read from r on w with ex, until r ends or
// breaks. Then it closes ex (every process it started is killed and
// awaited) and returns nil for a clean end of r, else the read error.
// Serve writes nothing but frames to w. hello is what the agent says of
// itself; its Version is set to this package's.
func Serve(r io.Reader, w io.Writer, ex shell.Executor, hello Hello) error {
	hello.Version = Version
	s := &server{c: NewConn(r, w), ex: ex, hello: hello, procs: make(map[uint64]shell.Process),
		terms: make(map[uint64]shell.Terminal), read: make(map[uint64]bool)}
	err := s.loop()
	s.ex.Close()
	s.wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type server struct {
	c     *Conn
	ex    shell.Executor
	hello Hello
	wg    sync.WaitGroup // request handlers and done watchers

	mu    sync.Mutex
	procs map[uint64]shell.Process
	terms map[uint64]shell.Terminal
	read  map[uint64]bool // foreground processes the client has read
}

// RefusedStatus is the exit status of an agent that could not start.
const RefusedStatus = 1

// refuseWait bounds Refuse's waits: for the client's hello, then for its
// end of the connection.
const refuseWait = 10 * time.Second

// Refuse answers the client's hello with why the agent could not start
// (msg, its last words on stderr too) and returns once the client has
// closed the connection, or after refuseWait for each, or once ctx is
// done (the agent's SIGTERM). The agent then
// exits with RefusedStatus. The reason travels in band, on the stream
// the client reads, not only on stderr: an engine's exec client can end
// without relaying the last words of a process that wrote them and
// exited at once (podman beside a loaded machine, TestPodmanHostMasked),
// and the agent exits only once the client has them.
func Refuse(ctx context.Context, r io.Reader, w io.Writer, msg string) {
	c := NewConn(r, w)
	read := func(v any) error {
		done := make(chan error, 1)
		go func() { done <- c.Read(v) }()
		t := time.NewTimer(refuseWait)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-t.C:
			return os.ErrDeadlineExceeded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var req Request
	if err := read(&req); err != nil {
		return
	}
	if c.Write(Response{ID: req.ID, Err: &Error{Kind: ErrKindStart, Msg: msg}}) != nil {
		return
	}
	for read(&req) == nil {
	}
}

func (s *server) loop() error {
	var req Request
	if err := s.c.Read(&req); err != nil {
		return err
	}
	if req.Op != OpHello || req.Version != Version {
		s.c.Write(Response{ID: req.ID, Err: &Error{Kind: ErrKindVersion,
			Msg: fmt.Sprintf("this agent speaks version %d; got %s version %d", Version, req.Op, req.Version)}})
		return fmt.Errorf("agent: client speaks %s version %d, not %d", req.Op, req.Version, Version)
	}
	h := s.hello
	if err := s.c.Write(Response{ID: req.ID, Hello: &h}); err != nil {
		return err
	}
	for {
		var req Request
		if err := s.c.Read(&req); err != nil {
			return err
		}
		// Each request on its own: a Close that waits for the grace must
		// not hold back the reads of other processes.
		s.wg.Go(func() { s.handle(req) })
	}
}

func (s *server) proc(id uint64) (shell.Process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	return p, ok
}

// handle answers one request. A write that fails means the connection is
// gone; the read loop sees that too and ends everything, so it is dropped.
func (s *server) handle(req Request) {
	resp := Response{ID: req.ID}
	switch req.Op {
	case OpStart:
		s.start(req)
		return
	case OpTermStart:
		s.startTerminal(req)
		return
	}
	if req.Op == OpEndOwner {
		if oe, ok := s.ex.(shell.OwnerEnder); ok {
			oe.EndOwner(req.Owner)
		} else {
			resp.Err = &Error{Kind: ErrKindOther, Msg: "this agent's executor cannot end an owner"}
		}
		s.c.Write(resp)
		return
	}
	if req.Op == OpClose {
		if err := s.ex.Close(); err != nil {
			resp.Err = EncodeError(err)
		}
		s.c.Write(resp)
		return
	}
	if t, ok := s.term(req.Proc); ok {
		s.handleTerminal(req, t)
		return
	}
	p, ok := s.proc(req.Proc)
	if !ok {
		resp.Err = &Error{Kind: ErrKindProc, Msg: fmt.Sprintf("no process %d", req.Proc)}
		s.c.Write(resp)
		return
	}
	switch req.Op {
	case OpRead:
		s.mu.Lock()
		s.read[req.Proc] = true
		s.mu.Unlock()
		resp.Read = EncodeRead(p.Read())
	case OpPeek:
		resp.Read = EncodeRead(p.Peek(req.Max))
	case OpKill:
		resp.Killed = p.Kill()
	case OpWritten:
		resp.Written[0], resp.Written[1] = p.Written()
	case OpLeftovers, OpKillLeft:
		lo, ok := p.(shell.Leftovers)
		var err error
		switch {
		case !ok:
			err = errors.ErrUnsupported
		case req.Op == OpLeftovers:
			resp.Count, err = lo.Leftovers()
		default:
			err = lo.KillLeftovers()
		}
		if err != nil {
			resp.Err = EncodeError(err)
		}
	case OpRelease:
		s.mu.Lock()
		delete(s.procs, req.Proc)
		delete(s.read, req.Proc)
		s.mu.Unlock()
	default:
		resp.Err = &Error{Kind: ErrKindOther, Msg: fmt.Sprintf("unknown operation %q", req.Op)}
	}
	s.c.Write(resp)
}

func (s *server) term(id uint64) (shell.Terminal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.terms[id]
	return t, ok
}

// handleTerminal answers a request about the terminal t.
func (s *server) handleTerminal(req Request, t shell.Terminal) {
	resp := Response{ID: req.ID}
	switch req.Op {
	case OpRead:
		resp.Read = &Read{Stdout: t.Read()}
	case OpPeek:
		resp.Read = &Read{Stdout: t.Peek(req.Max)}
	case OpWritten:
		resp.Written[0] = t.Written()
	case OpKill:
		t.Kill()
		resp.Killed = true
	case OpRaw:
		o := EncodeOutput(t.Raw())
		resp.Raw = &o
	case OpInput:
		if req.Input == nil {
			resp.Err = &Error{Kind: ErrKindOther, Msg: "input without arguments"}
			break
		}
		text, err := t.Input(req.Input.Text, req.Input.Keys, req.Input.Wait)
		if err != nil {
			resp.Err = &Error{Kind: ErrKindOther, Msg: err.Error()}
			break
		}
		resp.Read = &Read{Stdout: text}
	case OpRelease:
		s.mu.Lock()
		delete(s.terms, req.Proc)
		s.mu.Unlock()
	default:
		resp.Err = &Error{Kind: ErrKindOther, Msg: fmt.Sprintf("unknown operation %q on a terminal", req.Op)}
	}
	s.c.Write(resp)
}

// startTerminal starts a terminal, answers, and sends its done once it
// ended: its exit, and its raw stream as Stdout.
func (s *server) startTerminal(req Request) {
	resp := Response{ID: req.ID}
	a := req.Start
	terms, ok := s.ex.(shell.Terminals)
	switch {
	case a == nil:
		resp.Err = &Error{Kind: ErrKindOther, Msg: "term-start without arguments"}
	case !ok:
		resp.Err = &Error{Kind: ErrKindUnsupported, Msg: "this agent's executor has no terminals"}
	case s.taken(req.Proc):
		resp.Err = &Error{Kind: ErrKindOther, Msg: fmt.Sprintf("process id %d is taken", req.Proc)}
	}
	if resp.Err != nil {
		s.c.Write(resp)
		return
	}
	spec, err := s.ex.Resolve(shell.Request{Command: a.Command, Workdir: expandHome(a.Workdir),
		Env: a.Env, ManagedEnv: a.ManagedEnv, Owner: a.Owner})
	var t shell.Terminal
	if err == nil {
		t, err = terms.StartTerminal(spec)
	}
	if err != nil {
		resp.Err = EncodeError(err)
		s.c.Write(resp)
		return
	}
	s.mu.Lock()
	s.terms[req.Proc] = t
	s.mu.Unlock()
	s.started(req.Proc, resp, t.Kill, t.Done(), nil, func() *Done {
		code, sig := t.Exit()
		d := &Done{Status: shell.StatusCompleted, ExitCode: code, Signal: sig, Stdout: EncodeOutput(t.Raw())}
		if code == nil {
			d.Status = shell.StatusKilled
		}
		return d
	})
}

// started answers the start of id with resp (killing what started when
// the answer cannot be sent: the connection is gone), runs while, if any,
// until it returns, then waits for done and sends the done notification
// with result's Done, which therefore always comes after the answer.
func (s *server) started(id uint64, resp Response, kill func(), done <-chan struct{}, while func(), result func() *Done) {
	if s.c.Write(resp) != nil {
		kill()
	}
	if while != nil {
		while()
	}
	<-done
	s.c.Write(Response{Op: OpDone, Proc: id, Done: result()})
}

// taken reports whether id names no new process: 0, or one in use.
func (s *server) taken(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, p := s.procs[id]
	_, t := s.terms[id]
	return id == 0 || p || t
}

// start resolves and launches or starts a Spec, answers, and then follows
// the process to its end to send its done notification, which therefore
// always comes after the answer.
func (s *server) start(req Request) {
	resp := Response{ID: req.ID}
	a := req.Start
	if a == nil {
		resp.Err = &Error{Kind: ErrKindOther, Msg: "start without arguments"}
		s.c.Write(resp)
		return
	}
	if s.taken(req.Proc) {
		resp.Err = &Error{Kind: ErrKindOther, Msg: fmt.Sprintf("process id %d is taken", req.Proc)}
		s.c.Write(resp)
		return
	}
	r := shell.Request{Command: a.Command, Workdir: expandHome(a.Workdir), Timeout: a.Timeout,
		StdoutMaxBytes: a.StdoutMaxBytes, Env: a.Env, ManagedEnv: a.ManagedEnv, Owner: a.Owner}
	if a.HasStdin {
		r.Stdin = a.Stdin
		if r.Stdin == nil {
			r.Stdin = []byte{}
		}
	}
	spec, err := s.ex.Resolve(r)
	var p shell.Process
	if err == nil {
		if a.Background {
			p, err = s.ex.Start(spec)
		} else {
			p, err = s.ex.Launch(spec)
		}
	}
	if err != nil {
		resp.Err = EncodeError(err)
		s.c.Write(resp)
		return
	}
	s.mu.Lock()
	s.procs[req.Proc] = p
	s.mu.Unlock()
	var while func()
	if !a.Background {
		while = func() { s.sendOutput(req.Proc, p) }
	}
	s.started(req.Proc, resp, func() { p.Kill() }, p.Done(), while, func() *Done { return EncodeDone(p) })
}

// sendOutput sends the output of the foreground process p while it runs,
// at most every OutputInterval and only when it wrote something, until
// the client reads p itself (it then has the output it read) or p
// settles (done carries its Result).
func (s *server) sendOutput(id uint64, p shell.Process) {
	defer func() {
		s.mu.Lock()
		delete(s.read, id)
		s.mu.Unlock()
	}()
	t := time.NewTicker(OutputInterval)
	defer t.Stop()
	var sent [2]int64
	for {
		select {
		case <-p.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		read := s.read[id]
		s.mu.Unlock()
		if read {
			return
		}
		var w [2]int64
		w[0], w[1] = p.Written()
		if w == sent {
			continue
		}
		sent = w
		if s.c.Write(Response{Op: OpOutput, Proc: id, Read: EncodeRead(p.Peek(MaxOutput)), Written: w}) != nil {
			return
		}
	}
}

// expandHome expands a workdir of "~" or "~/…" (shell.IsHomeRelative) to the agent user's home; one
// that cannot be found leaves the path as given (the workdir error then
// names it).
func expandHome(workdir string) string {
	if !shell.IsHomeRelative(workdir) {
		return workdir
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return workdir
	}
	return filepath.Join(home, workdir[1:])
}
