// Package remote is the provider of the shell seam that runs commands on
// another host, through `conch agent` running there: the agent runs them
// with its host's local provider (containment, sandbox and spill files
// included) and this package speaks the agent protocol to it over any
// byte stream (an SSH session, `docker exec -i`, a pipe in tests).
//
// The connection is made on first use and made again after it was lost.
// A command that was running when its connection was lost is stopped by
// the agent (its input ends, and it kills everything it started) and
// settles here as killed, with LostMarker ending its stderr.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conch-dev/conch/internal/agent"
	"github.com/conch-dev/conch/internal/frame"
	"github.com/conch-dev/conch/shell"
)

// Dialer opens a byte stream to a fresh `conch agent` (it starts the
// agent). Closing the stream ends the agent's input, and the agent then
// kills everything it started. A Dialer that is also an io.Closer (it
// holds a connection its streams share) is closed by Executor.Close.
type Dialer interface {
	Dial(ctx context.Context) (io.ReadWriteCloser, error)
}

// DialFunc adapts a function to a Dialer.
type DialFunc func(ctx context.Context) (io.ReadWriteCloser, error)

// Dial calls f.
func (f DialFunc) Dial(ctx context.Context) (io.ReadWriteCloser, error) { return f(ctx) }

// Defaults of Options.
const (
	DefaultTimeout     = 120 * time.Second
	DefaultMaxTimeout  = 600 * time.Second
	DefaultDialTimeout = 20 * time.Second
)

// Options configure an Executor; a zero field means its default.
type Options struct {
	// Cwd is the default working directory on the host; "" means the
	// agent's own (the remote user's home, for an SSH login). A relative
	// workdir is resolved against it, on the host when it is "".
	Cwd string
	// Timeout is the default foreground timeout (default 120 s).
	Timeout time.Duration
	// MaxTimeout caps every foreground timeout (default 600 s).
	MaxTimeout time.Duration
	// DialTimeout bounds a connection attempt, the hello included
	// (default 20 s).
	DialTimeout time.Duration
	// OnConnect, if set, is told what the agent said of itself each time
	// a connection is made (what it enforces there, say, for a log).
	OnConnect func(agent.Hello)
}

// Executor runs commands on one host through its agent. Create it with
// New; it is safe for concurrent use.
type Executor struct {
	name string
	d    Dialer
	opts Options

	// connMu serialises dialling; the connection it guards is replaced
	// after a loss.
	connMu sync.Mutex
	conn   *conn
	closed bool

	nextProc atomic.Uint64
}

var (
	_ shell.Executor        = (*Executor)(nil)
	_ shell.ContextLauncher = (*Executor)(nil)
	_ shell.OwnerEnder      = (*Executor)(nil)
	_ shell.Terminals       = (*Executor)(nil)
)

// UnreachableError is a host that could not be reached (or whose agent
// could not be started): the command did not run.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("host %s unreachable: %v; the command did not run", e.Host, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// ErrLost is wrapped by the errors of calls cut by a lost connection.
var ErrLost = errors.New("connection lost")

// LostMarker is the line that ends the stderr of a command cut by a lost
// connection to host.
func LostMarker(host string) string {
	return "[connection to host " + host + " lost; the command was stopped]"
}

// New returns an Executor for the host called name (as the model and the
// user know it), reached through d. It does not connect yet.
func New(name string, d Dialer, opts *Options) (*Executor, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Timeout", &o.Timeout, DefaultTimeout},
		{"MaxTimeout", &o.MaxTimeout, DefaultMaxTimeout},
		{"DialTimeout", &o.DialTimeout, DefaultDialTimeout},
	} {
		switch {
		case *f.v < 0:
			return nil, fmt.Errorf("remote: %s must be a positive finite number", f.name)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if o.Cwd != "" && !path.IsAbs(o.Cwd) {
		return nil, fmt.Errorf("remote: Cwd %q must be absolute", o.Cwd)
	}
	return &Executor{name: name, d: d, opts: o}, nil
}

// Name is the host's name.
func (e *Executor) Name() string { return e.name }

// Resolve implements shell.Executor. It does not connect: the host's own
// checks (the workdir, the stdout cap) come with Launch and Start. With no
// Cwd configured, Spec.Workdir stays "" or relative and is resolved on the
// host, against the agent's directory; "~" and "~/…" are the remote
// user's home, expanded on the host.
func (e *Executor) Resolve(r shell.Request) (shell.Spec, error) {
	return shell.Limits{Cwd: e.opts.Cwd, Timeout: e.opts.Timeout, MaxTimeout: e.opts.MaxTimeout, HomeRelative: true}.Resolve(r)
}

// Launch implements shell.Executor.
func (e *Executor) Launch(s shell.Spec) (shell.Process, error) {
	return e.start(context.Background(), s, false)
}

// LaunchContext implements shell.ContextLauncher: ctx bounds the dial,
// when there is one, and a dial that ctx ended is an abort before spawn.
func (e *Executor) LaunchContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return e.startContext(ctx, s, false)
}

// StartContext implements shell.ContextLauncher: Start with ctx bounding
// the dial, as LaunchContext.
func (e *Executor) StartContext(ctx context.Context, s shell.Spec) (shell.Process, error) {
	return e.startContext(ctx, s, true)
}

// startContext is start, with a dial that ctx ended an abort before
// spawn.
func (e *Executor) startContext(ctx context.Context, s shell.Spec, background bool) (shell.Process, error) {
	p, err := e.start(ctx, s, background)
	if err != nil {
		var ue *UnreachableError
		if errors.As(err, &ue) && ended(ctx) {
			cause := context.Cause(ctx)
			if cause == nil {
				cause = context.DeadlineExceeded
			}
			return nil, shell.AbortedBeforeSpawn(cause)
		}
		return nil, err
	}
	return p, nil
}

// ended reports whether ctx is done or its deadline has passed. A dial
// bounded by the deadline fails with an i/o timeout from the network
// poller's timer, which can fire a moment before ctx's own marks it
// done: on a loaded machine that dial was read as a host unreachable.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Start implements shell.Executor.
func (e *Executor) Start(s shell.Spec) (shell.Process, error) {
	return e.start(context.Background(), s, true)
}

// ErrNarrowing is the error of a command whose Request narrows the
// sandbox (shell.Request.Narrowing): a project file narrows this
// machine's sandbox, and a host's commands run in its agent's, so the
// command is refused rather than run wider than the project asked.
var ErrNarrowing = errors.New("a project's sandbox cannot reach a remote host")

func (e *Executor) start(ctx context.Context, s shell.Spec, background bool) (*process, error) {
	if s.Narrowing != nil {
		return nil, ErrNarrowing
	}
	a := &agent.StartArgs{Background: background, Command: s.Command, Workdir: s.Workdir,
		Timeout: s.Timeout, StdoutMaxBytes: s.StdoutMaxBytes, HasStdin: s.Stdin != nil, Stdin: s.Stdin,
		Env: s.Env, ManagedEnv: s.ManagedEnv, Owner: s.Owner}
	timeout := s.Timeout
	if background {
		a.Timeout, timeout = 0, 0
	}
	return e.open(ctx, agent.OpStart, a, timeout)
}

// open asks the agent to start what a describes, with op (a command, or
// a terminal), and returns it as a process of this connection; timeout is
// a foreground command's, for the result of a lost one.
func (e *Executor) open(ctx context.Context, op string, a *agent.StartArgs, timeout time.Duration) (*process, error) {
	c, err := e.connect(ctx)
	if err != nil {
		return nil, err
	}
	p := &process{c: c, id: e.nextProc.Add(1), owner: a.Owner, timeout: timeout, done: make(chan struct{}), released: new(atomic.Bool)}
	if !c.register(p) {
		<-c.readDone // the loss is recorded by then
		return nil, &UnreachableError{Host: e.name, Err: c.calls.Err()}
	}
	resp, err := c.call(agent.Request{Op: op, Proc: p.id, Start: a})
	if err == nil && resp.Err != nil {
		err = resp.Err.Err()
	}
	if errors.Is(err, ErrLost) && p.lostNow() {
		// The connection was lost after the request went out: the command
		// may have started, and the agent stopped it when its input
		// ended. p is settled like any process the loss cut, with the
		// lost marker; "did not run" would not be known to be true.
		return p, nil
	}
	if err != nil {
		c.unregister(p)
		// Nobody gets p, but an EndOwner may be waiting for it.
		p.settle(&agent.Done{Status: shell.StatusKilled}, false)
		if errors.Is(err, ErrLost) {
			return nil, &UnreachableError{Host: e.name, Err: err}
		}
		return nil, err
	}
	// The agent forgets a process once nobody here can read it any more.
	runtime.AddCleanup(p, func(r releaser) { r.release() }, releaser{c, p.id, p.released})
	return p, nil
}

// connect returns the live connection, dialling one when there is none.
func (e *Executor) connect(ctx context.Context) (*conn, error) {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	if e.closed {
		return nil, shell.ErrClosed
	}
	if e.conn != nil && !e.conn.isLost() {
		return e.conn, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.opts.DialTimeout)
	defer cancel()
	c, err := dial(ctx, e.name, e.d)
	if err != nil {
		return nil, &UnreachableError{Host: e.name, Err: err}
	}
	e.conn = c
	if e.opts.OnConnect != nil {
		e.opts.OnConnect(c.hello)
	}
	return c, nil
}

// Hello returns what the agent said of itself, connecting if needed.
func (e *Executor) Hello(ctx context.Context) (agent.Hello, error) {
	c, err := e.connect(ctx)
	if err != nil {
		return agent.Hello{}, err
	}
	return c.hello, nil
}

// EndOwner implements shell.OwnerEnder: the agent kills what owner's
// commands still run or left running on the host (as its executor's
// EndOwner does) and answers once it is gone; EndOwner then waits for
// those commands to settle here. Without a live connection there is
// nothing to end: a lost connection made the agent kill everything, and
// EndOwner does not dial. An agent too old to end an owner leaves the
// owner's leftovers until the connection ends.
func (e *Executor) EndOwner(owner string) {
	e.connMu.Lock()
	c := e.conn
	e.connMu.Unlock()
	if c == nil || c.isLost() {
		return
	}
	procs := c.owned(owner)
	resp, err := c.call(agent.Request{Op: agent.OpEndOwner, Owner: owner})
	if err != nil || resp.Err != nil {
		return // lost (the agent killed everything), or an agent that cannot
	}
	// The agent sends each one's done right after it ended, or the
	// connection's loss settles it.
	for _, p := range procs {
		<-p.done
	}
}

// Close implements shell.Executor: the agent kills everything it runs and
// answers once it is gone; then the connection is closed (the agent
// exits).
func (e *Executor) Close() error {
	e.connMu.Lock()
	defer e.connMu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.closeConn()
	if c, ok := e.d.(io.Closer); ok {
		if cerr := c.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("remote: close %s: %w", e.name, cerr)
		}
	}
	return err
}

// closeConn asks the agent to kill everything and closes the connection.
func (e *Executor) closeConn() error {
	if e.conn == nil {
		return nil
	}
	c := e.conn
	var err error
	if !c.isLost() {
		var resp agent.Response
		resp, err = c.call(agent.Request{Op: agent.OpClose})
		if err == nil && resp.Err != nil {
			err = resp.Err.Err()
		}
		if errors.Is(err, ErrLost) {
			err = nil // the agent kills everything when its input ends
		}
	}
	c.close()
	if err != nil {
		return fmt.Errorf("remote: close %s: %w", e.name, err)
	}
	return nil
}

// conn is one connection to an agent.
type conn struct {
	host  string
	rwc   io.ReadWriteCloser
	fc    *agent.Conn
	hello agent.Hello

	calls frame.Calls[agent.Response] // failed with the loss (ErrLost) when the connection broke or was closed

	mu    sync.Mutex
	procs map[uint64]*process // nil once the connection is lost

	readDone chan struct{}
}

func dial(ctx context.Context, host string, d Dialer) (*conn, error) {
	rwc, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	c := &conn{host: host, rwc: rwc, fc: agent.NewConn(rwc, rwc),
		procs:    make(map[uint64]*process),
		readDone: make(chan struct{})}
	go c.readLoop()
	// The hello is bounded by ctx: a stream that never answers (a remote
	// login shell printing a banner, a hung agent) must not hang the call.
	type helloResult struct {
		resp agent.Response
		err  error
	}
	ch := make(chan helloResult, 1)
	go func() {
		resp, err := c.call(agent.Request{Op: agent.OpHello, Version: agent.Version})
		ch <- helloResult{resp, err}
	}()
	select {
	case r := <-ch:
		switch {
		case r.err == nil && r.resp.Err != nil && r.resp.Err.Kind == agent.ErrKindStart:
			// The agent could not start; it exits once we close.
			r.err = fmt.Errorf("agent exited with status %d: %s", agent.RefusedStatus, r.resp.Err.Msg)
		case r.err == nil && r.resp.Err != nil:
			r.err = fmt.Errorf("agent refused the protocol: %s", r.resp.Err.Msg)
		}
		if r.err == nil && r.resp.Hello == nil {
			r.err = errors.New("agent sent no hello")
		}
		if r.err != nil {
			c.close()
			return nil, fmt.Errorf("hello: %w", r.err)
		}
		c.hello = *r.resp.Hello
		return c, nil
	case <-ctx.Done():
		c.close()
		<-ch
		return nil, fmt.Errorf("hello: %w", context.Cause(ctx))
	}
}

func (c *conn) isLost() bool { return c.calls.Err() != nil }

// close ends the connection and waits for its reader.
func (c *conn) close() {
	c.rwc.Close()
	<-c.readDone
}

// register records p, unless the connection is lost: then it reports
// false, and p never reaches the agent.
func (c *conn) register(p *process) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.procs == nil {
		return false
	}
	c.procs[p.id] = p
	return true
}

func (c *conn) unregister(p *process) {
	c.mu.Lock()
	delete(c.procs, p.id)
	c.mu.Unlock()
}

// owned are the running processes of owner.
func (c *conn) owned(owner string) []*process {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []*process
	for _, p := range c.procs {
		if p.owner == owner {
			ps = append(ps, p)
		}
	}
	return ps
}

// call sends req and waits for its answer. It fails with ErrLost when the
// connection is or becomes lost first.
func (c *conn) call(req agent.Request) (agent.Response, error) {
	id, answer, err := c.calls.Begin()
	if err != nil {
		return agent.Response{}, err
	}
	req.ID = id
	if err := c.fc.Write(req); err != nil {
		if errors.Is(err, agent.ErrFrameTooLarge) {
			// Nothing was sent: the connection is fine.
			c.calls.Forget(id)
			return agent.Response{}, fmt.Errorf("remote: %s request: %w", req.Op, err)
		}
		// The reader notices the broken stream too; close it so that it
		// does even when only the writing side broke.
		c.rwc.Close()
	}
	resp, ok := <-answer
	if !ok {
		return agent.Response{}, c.calls.Err()
	}
	return resp, nil
}

// readLoop dispatches answers and notifications until the stream ends,
// then fails every pending call and settles every running process as
// lost.
func (c *conn) readLoop() {
	defer close(c.readDone)
	var err error
	for {
		var resp agent.Response
		if err = c.fc.Read(&resp); err != nil {
			break
		}
		if resp.ID == 0 {
			switch {
			case resp.Op == agent.OpDone && resp.Done != nil:
				c.mu.Lock()
				p := c.procs[resp.Proc]
				delete(c.procs, resp.Proc)
				c.mu.Unlock()
				if p != nil {
					p.settle(resp.Done, false)
				}
			case resp.Op == agent.OpOutput && resp.Read != nil:
				c.mu.Lock()
				if p := c.procs[resp.Proc]; p != nil {
					p.sent = &sentOutput{resp.Read.Stdout, resp.Read.Stderr, resp.Written}
				}
				c.mu.Unlock()
			}
			continue
		}
		c.calls.Answer(resp.ID, resp)
	}
	c.rwc.Close()
	// No process registers after this; every call not answered fails.
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	c.calls.Fail(fmt.Errorf("host %s: %w: %v", c.host, ErrLost, err))
	for _, p := range procs {
		p.settle(p.lostDone(c.host), true)
	}
}

// sentOutput is what the agent sent of a foreground process's output
// while it ran: the end of each stream, and their sizes.
type sentOutput struct {
	stdout, stderr string
	written        [2]int64
}

// lostDone is the result of p cut by the loss of its connection: killed,
// with the output the agent sent before the cut (unless p was read: that
// output was delivered by the reads), then the lost marker. The host's
// spill files went with the agent.
func (p *process) lostDone(host string) *agent.Done {
	d := &agent.Done{Status: shell.StatusKilled, Timeout: p.timeout}
	if o := p.sent; o != nil && !p.consumed.Load() {
		d.Stdout, d.Stderr = lostOutput(o.stdout, o.written[0]), lostOutput(o.stderr, o.written[1])
	}
	if t := d.Stderr.Text; t != "" && !strings.HasSuffix(t, "\n") {
		d.Stderr.Text += "\n"
	}
	d.Stderr.Text += LostMarker(host) + "\n"
	return d
}

// errSpillLost is why a cut call's output names no spill file.
var errSpillLost = errors.New("the host's spill file went with the connection")

func lostOutput(text string, size int64) agent.Output {
	o := agent.Output{Text: text, Size: size}
	if size > int64(len(text)) {
		o.Truncated, o.SpillErr = true, &agent.SpillErr{Msg: errSpillLost.Error()}
	}
	return o
}

// releaser tells the agent to forget a process; it must not refer to the
// process itself (it runs when the process is unreachable).
type releaser struct {
	c    *conn
	id   uint64
	done *atomic.Bool
}

func (r releaser) release() {
	if r.done.Swap(true) || r.c.isLost() {
		return
	}
	go r.c.call(agent.Request{Op: agent.OpRelease, Proc: r.id})
}

// process is a command running on the host: the shell.Process of Start
// and Launch.
type process struct {
	c       *conn
	id      uint64
	owner   string        // the Spec's Owner
	timeout time.Duration // Launch only

	done     chan struct{}
	settleMu sync.Mutex
	result   *agent.Done // set before done is closed
	lost     bool        // settled by the loss of the connection
	lostRead atomic.Bool // the lost marker was read
	// sent is the output the agent last sent while p ran (conn.mu);
	// consumed: p was read, which delivered its output instead.
	sent     *sentOutput
	consumed atomic.Bool
	// released: the agent was told to forget it. Its own allocation: the
	// cleanup that releases p must not point into p, or p never dies.
	released *atomic.Bool
}

var (
	_ shell.Process   = (*process)(nil)
	_ shell.Leftovers = (*process)(nil)
)

func (p *process) settle(d *agent.Done, lost bool) {
	p.settleMu.Lock()
	defer p.settleMu.Unlock()
	if p.result != nil {
		return
	}
	p.result, p.lost = d, lost
	close(p.done)
}

func (p *process) settled() *agent.Done {
	select {
	case <-p.done:
		return p.result
	default:
		return nil
	}
}

func (p *process) release() { releaser{p.c, p.id, p.released}.release() }

func (p *process) Done() <-chan struct{} { return p.done }

func (p *process) Status() shell.Status {
	if d := p.settled(); d != nil {
		return d.Status
	}
	return shell.StatusRunning
}

func (p *process) ExitCode() *int {
	if d := p.settled(); d != nil {
		return d.ExitCode
	}
	return nil
}

func (p *process) Signal() string {
	if d := p.settled(); d != nil {
		return d.Signal
	}
	return ""
}

// Result implements shell.Process; spill paths name files of the host.
func (p *process) Result() shell.Result {
	<-p.done
	res := p.result.Result()
	res.Stdout.Host, res.Stderr.Host = p.c.host, p.c.host
	return res
}

// Kill implements shell.Process. It asks the agent, which answers at once
// (its kill runs on there); a lost connection already stopped the command.
func (p *process) Kill() bool {
	if p.settled() != nil {
		return false
	}
	resp, err := p.c.call(agent.Request{Op: agent.OpKill, Proc: p.id})
	return err == nil && resp.Killed
}

// Read implements shell.Process. After a lost connection it returns the
// lost marker in its stderr part, once.
func (p *process) Read() shell.ReadResult {
	p.consumed.Store(true)
	return p.read(agent.Request{Op: agent.OpRead, Proc: p.id})
}

// Peek implements shell.Process.
func (p *process) Peek(maxBytes int) shell.ReadResult {
	return p.read(agent.Request{Op: agent.OpPeek, Proc: p.id, Max: maxBytes})
}

func (p *process) read(req agent.Request) shell.ReadResult {
	resp, err := p.c.call(req)
	if err == nil && resp.Err != nil {
		return shell.ReadResult{}
	}
	if err != nil {
		if !p.lostNow() {
			return shell.ReadResult{}
		}
		if req.Op == agent.OpPeek {
			if p.lostRead.Load() {
				return shell.ReadResult{}
			}
		} else if p.lostRead.Swap(true) {
			return shell.ReadResult{}
		}
		return shell.ReadResult{Stderr: p.result.Stderr.Text}
	}
	r := resp.Read.ReadResult()
	r.Host = p.c.host
	return r
}

// lostNow reports, once a call failed for the loss of the connection,
// whether that loss settled p (the reader settles it right after failing
// the call).
func (p *process) lostNow() bool {
	<-p.c.readDone
	p.settleMu.Lock()
	defer p.settleMu.Unlock()
	return p.lost
}

// Written implements shell.Process.
func (p *process) Written() (stdout, stderr int64) {
	if d := p.settled(); d != nil {
		return d.Stdout.Size, d.Stderr.Size
	}
	resp, err := p.c.call(agent.Request{Op: agent.OpWritten, Proc: p.id})
	if err != nil {
		return 0, 0
	}
	return resp.Written[0], resp.Written[1]
}

// Leftovers implements shell.Leftovers: the agent's executor counts
// what the command left on the host. An agent too old to know the
// operation answers errors.ErrUnsupported; after a lost connection,
// the agent killed everything it ran, so nothing is left.
func (p *process) Leftovers() (int, error) {
	if p.settled() == nil {
		return 0, nil
	}
	resp, err := p.c.call(agent.Request{Op: agent.OpLeftovers, Proc: p.id})
	switch {
	case err != nil && p.lostNow():
		return 0, nil
	case err != nil:
		return 0, err
	case resp.Err != nil:
		return 0, resp.Err.Err()
	}
	return resp.Count, nil
}

// KillLeftovers implements shell.Leftovers: the agent kills them and
// answers once they are gone.
func (p *process) KillLeftovers() error {
	if p.settled() == nil {
		return nil
	}
	resp, err := p.c.call(agent.Request{Op: agent.OpKillLeft, Proc: p.id})
	switch {
	case err != nil && p.lostNow():
		return nil
	case err != nil:
		return err
	case resp.Err != nil:
		return resp.Err.Err()
	}
	return nil
}

// StartTerminal implements shell.Terminals: the agent starts the terminal
// on its host, with its executor's terminals (contained there as its
// commands are). An agent whose executor has none, or one too old to know
// terminals (it does not know the operation), is refused with
// `tty is not available on host <name>` (docs/terminal.md).
func (e *Executor) StartTerminal(s shell.Spec) (shell.Terminal, error) {
	if s.Narrowing != nil {
		return nil, ErrNarrowing
	}
	p, err := e.open(context.Background(), agent.OpTermStart, &agent.StartArgs{Command: s.Command, Workdir: s.Workdir,
		Env: s.Env, ManagedEnv: s.ManagedEnv, Owner: s.Owner}, 0)
	if errors.Is(err, errors.ErrUnsupported) || err != nil && strings.Contains(err.Error(), `unknown operation "`+agent.OpTermStart+`"`) {
		return nil, fmt.Errorf("tty is not available on host %s", e.name)
	}
	if err != nil {
		return nil, err
	}
	return &terminal{p}, nil
}

// terminal is a terminal running on the host: the shell.Terminal of
// StartTerminal. It settles as a process does; its done carries its raw
// stream as Stdout.
type terminal struct{ p *process }

var _ shell.Terminal = (*terminal)(nil)

// Read implements shell.Terminal. After a lost connection it returns the
// lost marker, once.
func (t *terminal) Read() string {
	r := t.p.Read()
	return r.Stdout + r.Stderr
}

// Peek implements shell.Terminal.
func (t *terminal) Peek(maxBytes int) string {
	r := t.p.Peek(maxBytes)
	return r.Stdout + r.Stderr
}

// Written implements shell.Terminal.
func (t *terminal) Written() int64 {
	w, _ := t.p.Written()
	return w
}

// Input implements shell.Terminal; its errors are the terminal's own
// words (an unknown key, a program that ended).
func (t *terminal) Input(text string, keys []string, wait time.Duration) (string, error) {
	resp, err := t.p.c.call(agent.Request{Op: agent.OpInput, Proc: t.p.id,
		Input: &agent.InputArgs{Text: text, Keys: keys, Wait: wait}})
	switch {
	case err != nil:
		return "", fmt.Errorf("host %s: input: %w", t.p.c.host, err)
	case resp.Err != nil:
		return "", errors.New(resp.Err.Msg)
	}
	return resp.Read.ReadResult().Stdout, nil
}

// Kill implements shell.Terminal.
func (t *terminal) Kill() { t.p.Kill() }

// Done implements shell.Terminal.
func (t *terminal) Done() <-chan struct{} { return t.p.Done() }

// Exit implements shell.Terminal.
func (t *terminal) Exit() (code *int, signal string) { return t.p.ExitCode(), t.p.Signal() }

// Raw implements shell.Terminal: the raw stream as the agent sent it in
// the terminal's done, or, before, as it answers now (its spill file a
// path of the host either way). A lost connection leaves its size.
func (t *terminal) Raw() shell.Output {
	var o shell.Output
	if d := t.p.settled(); d != nil {
		o = d.Stdout.Output()
	} else if resp, err := t.p.c.call(agent.Request{Op: agent.OpRaw, Proc: t.p.id}); err == nil && resp.Raw != nil {
		o = resp.Raw.Output()
	} else {
		o.Size = t.Written()
	}
	o.Host = t.p.c.host
	return o
}
