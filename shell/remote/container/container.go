// Package container reaches a running container for shell/remote, through
// its engine's exec with stdin and stdout attached (`podman exec -i`,
// `docker exec -i`): it deploys this conch binary into the container when
// the container lacks it (over exec stdin, its checksum checked, as over
// SSH) and starts `conch agent` there, whose stdin and stdout carry the
// agent protocol. Only the byte stream differs from an SSH host: the
// agent owns the processes, and kills them all when its input ends (an
// exec stream that closes does not kill what it started).
//
// The agent always gets an explicit working directory: the host's Cwd,
// else the container user's home. An engine's exec starts in the image's
// working directory, often /, and an agent that took / as the workspace
// of workspace-write would let its commands write anywhere.
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/shell/remote"
)

// Engines are the engines this package drives: their exec takes the same
// flags.
var Engines = []string{"podman", "docker"}

// Host is a container that commands run in.
type Host struct {
	// Name is the host as the model and the user know it.
	Name string
	// Engine is "podman" or "docker".
	Engine string
	// Container is the container's name or ID; it must be running.
	Container string
	// Image, instead of Container, makes the host a template
	// (NewTemplate): each owner's commands run in a container of its own,
	// made from Image.
	Image string
	// Cwd is where commands run by default in the container; "" means
	// the home directory of the container's user.
	Cwd string
	// User is the user the agent runs as (exec's --user); "" is the
	// container's.
	User string
}

// Options configure how the container is reached; a zero field means its
// default.
type Options struct {
	// EngineBinary is the engine's command (default: Host.Engine, looked
	// up in PATH).
	EngineBinary string
	// EngineArgs go before "exec" (a connection: podman's --url, docker's
	// --host or --context).
	EngineArgs []string
	// AgentBinary is the conch binary deployed to the container (default:
	// this program's executable). It must be built for the container's OS
	// and architecture, and run with the libraries the image has (a conch
	// built with CGO_ENABLED=0 runs in any image).
	AgentBinary string
	// AgentArgs are extra arguments of `conch agent` in the container.
	AgentArgs []string
	// Stderr receives the agent's standard error (default: discarded).
	Stderr io.Writer
	// Executor configures the remote executor; its Cwd is Host.Cwd.
	Executor remote.Options
	// RunArgs are more options of a template's `run` (NewTemplate),
	// after UnmaskArgs and before the image: --network none, say.
	RunArgs []string
	// StartTimeout bounds starting a template's container, a pull of
	// its image included (default DefaultStartTimeout).
	StartTimeout time.Duration
}

// New returns an executor for h that reaches it through its engine's
// exec. It connects on first use.
func New(h Host, o *Options) (*remote.Executor, error) {
	d, err := NewDialer(h, o)
	if err != nil {
		return nil, err
	}
	var ro remote.Options
	if o != nil {
		ro = o.Executor
	}
	ro.Cwd = h.Cwd
	return remote.New(h.Name, d, &ro)
}

// engineDaemons are the executables of the daemons a container engine
// run by conch leaves behind: podman's pause process (podman itself, or
// catatonit) and conmon. They are spared (proc.SpareDaemons).
var engineDaemons = []string{"podman", "catatonit", "conmon"}

// Dialer starts agents in one container; it implements remote.Dialer.
type Dialer struct {
	host    Host
	opts    Options
	binHash string

	mu   sync.Mutex      // serialises deploying
	prep remote.Prepared // the deployed agent and its directory, once deployed
}

var _ remote.Dialer = (*Dialer)(nil)

// NewDialer checks h and reads the agent binary's checksum.
func NewDialer(h Host, o *Options) (*Dialer, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	switch {
	case h.Image != "":
		return nil, fmt.Errorf("host %s: image %s names a template: use NewTemplate", h.Name, h.Image)
	case h.Container == "":
		return nil, fmt.Errorf("host %s: no container named", h.Name)
	case h.Cwd != "" && !path.IsAbs(h.Cwd):
		return nil, fmt.Errorf("host %s: cwd %q must be absolute", h.Name, h.Cwd)
	}
	if opts.EngineBinary == "" {
		if !isEngine(h.Engine) {
			return nil, fmt.Errorf("host %s: unknown container engine %q (want %s)", h.Name, h.Engine, strings.Join(Engines, " or "))
		}
		opts.EngineBinary = h.Engine
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	var err error
	if opts.AgentBinary == "" {
		if opts.AgentBinary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("host %s: find conch's own binary: %w", h.Name, err)
		}
	}
	sum, err := remote.FileSHA256(opts.AgentBinary)
	if err != nil {
		return nil, fmt.Errorf("host %s: checksum of the agent binary: %w", h.Name, err)
	}
	// podman (or docker as podman's shim) leaves daemons re-parented to
	// conch, a child subreaper: rootless podman's pause process, which
	// holds the user namespace of all of the user's rootless containers,
	// and a conmon per exec and container. They are the engine's, not a
	// command's, and conch must not kill them as escapees.
	proc.SpareDaemons(engineDaemons...)
	return &Dialer{host: h, opts: opts, binHash: sum}, nil
}

func isEngine(s string) bool {
	for _, e := range Engines {
		if s == e {
			return true
		}
	}
	return false
}

// exec is the engine's command that runs argv in the container, stdin
// attached; workdir "" is the image's.
func (d *Dialer) exec(workdir string, argv ...string) *exec.Cmd {
	args := append([]string{}, d.opts.EngineArgs...)
	args = append(args, "exec", "-i")
	if workdir != "" {
		args = append(args, "--workdir", workdir)
	}
	if d.host.User != "" {
		args = append(args, "--user", d.host.User)
	}
	args = append(args, d.host.Container)
	cmd := exec.Command(d.opts.EngineBinary, append(args, argv...)...)
	// Its own process group: a signal meant for conch's group (a ^C in a
	// terminal) must not cut the stream before conch ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run implements remote.RunScript with the container's sh.
func (d *Dialer) run(ctx context.Context, script string, stdin io.Reader) (string, error) {
	cmd := d.exec("", "sh", "-c", script)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	// Claimed (proc.StartCmd): conch, a child subreaper, reaps the
	// unclaimed children that leave its process group, and a reap
	// before Wait made it fail with "waitid: no child processes".
	if err := proc.StartCmd(cmd); err != nil {
		return "", fmt.Errorf("%s exec: %w", d.opts.EngineBinary, err)
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err := proc.WaitCmd(cmd)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		return "", err
	}
	return out.String(), nil
}

// Dial implements remote.Dialer: it deploys the agent when the container
// lacks it, and starts it.
func (d *Dialer) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prep.Path == "" {
		prep, err := remote.Prepare(ctx, d.host.Name, d.run, d.opts.AgentBinary, d.binHash, d.host.Cwd)
		if err != nil {
			return nil, err
		}
		d.prep = prep
	}
	return d.startAgent()
}

// startAgent starts the agent with an exec of its own.
func (d *Dialer) startAgent() (io.ReadWriteCloser, error) {
	st, err := startStream(d.exec(d.prep.Cwd, d.prep.Argv(d.opts.AgentArgs)...), d.opts.Stderr)
	if err != nil {
		return nil, fmt.Errorf("start agent: %s exec: %w", d.opts.EngineBinary, err)
	}
	return st, nil
}

// startStream starts cmd, an exec client running the agent, its stderr
// copied to stderr and its last words kept.
func startStream(cmd *exec.Cmd, stderr io.Writer) (*stream, error) {
	// Pipes of our own, not cmd's: Wait closes those it made as soon as
	// the client exits, under a Read that may still be draining.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	st := &stream{cmd: cmd, in: inW, out: outR, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.Stderr = io.MultiWriter(stderr, &st.stderr)
	err = proc.StartCmd(cmd) // claimed, as in run
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	go func() {
		st.exitErr = proc.WaitCmd(cmd)
		close(st.exited)
	}()
	return st, nil
}

// Bounds of a stream's end.
const (
	// exitWait bounds the wait for the exec client's exit status once
	// the agent's output ended: as long as Close waits for the client.
	// The agent is gone then, and what is left is the engine's own
	// bookkeeping (conmon's exit file, the exec session's cleanup),
	// which took over 2 s beside a loaded CI run: a 2 s bound there
	// turned the agent's stated reason for refusing to start into
	// "connection lost: EOF" (TestPodmanHostMasked).
	exitWait = closeWait
	// closeWait bounds the wait for the exec client to exit once the
	// agent's input was closed: the agent kills what it started (its
	// grace included) and exits, and then the client does; a client
	// still there after it is killed.
	closeWait = 30 * time.Second
)

// stream is an agent's exec: its stdout to read, its stdin to write.
type stream struct {
	cmd     *exec.Cmd
	in      *os.File
	out     *os.File
	stderr  remote.StderrTail
	exited  chan struct{} // closed once Wait returned exitErr
	exitErr error
	once    sync.Once
}

// Read implements io.Reader. When the agent's output ends because it
// exited with an error (it could not start: a mode this container cannot
// enforce, a cwd it lacks), the error says so in the agent's last words;
// without them, it says how the exec client ended (a status, a signal)
// rather than a bare EOF. A clean exit is io.EOF.
func (st *stream) Read(b []byte) (int, error) {
	n, err := st.out.Read(b)
	if err != io.EOF {
		return n, err
	}
	select {
	case <-st.exited:
	case <-time.After(exitWait):
		return n, io.EOF
	}
	var ee *exec.ExitError
	if !errors.As(st.exitErr, &ee) {
		return n, io.EOF
	}
	last := st.stderr.Last()
	switch {
	case ee.Exited() && last != "":
		return n, fmt.Errorf("agent exited with status %d: %s", ee.ExitCode(), last)
	case ee.Exited():
		return n, fmt.Errorf("the exec client exited with status %d, nothing on its standard error", ee.ExitCode())
	default:
		return n, fmt.Errorf("the exec client ended: %v", ee)
	}
}

func (st *stream) Write(b []byte) (int, error) { return st.in.Write(b) }

// Close ends the agent's input (it then kills what it started and exits)
// and waits for the exec client to end.
func (st *stream) Close() error {
	st.once.Do(func() {
		st.in.Close()
		select {
		case <-st.exited:
		case <-time.After(closeWait):
			st.cmd.Process.Kill()
			<-st.exited
		}
		st.out.Close()
	})
	return nil
}
