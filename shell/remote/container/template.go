package container

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/conch-dev/conch/internal/proc"
	"github.com/conch-dev/conch/shell"
	"github.com/conch-dev/conch/shell/remote"
)

// Labels of a template's containers: the host they serve, and the conch
// process that started them (ServerLabel), by which a later conch finds
// the containers of a conch that died without removing them.
const (
	TemplateLabel = "conch.template"
	ServerLabel   = "conch.server"
)

// DefaultStartTimeout bounds starting a template's container (the engine
// may pull the image first).
const DefaultStartTimeout = 5 * time.Minute

// UnmaskArgs are the options of `run` with which a template's container
// lets the agent contain and sandbox its commands, by engine (see
// docs/remote.md): every engine's default masks parts of /proc, which
// stops the mount of a fresh /proc in a new PID namespace, and docker's
// default seccomp profile also refuses new user namespaces. The container
// is conch's own and runs nothing but the agent, which puts each command
// in a PID and user namespace under its own sandbox (Landlock and a
// seccomp filter): without these options the commands would get neither.
var UnmaskArgs = map[string][]string{
	"podman": {"--security-opt", "unmask=/proc/*"},
	"docker": {"--security-opt", "systempaths=unconfined", "--security-opt", "seccomp=unconfined"},
}

// Template is a host made from an image (Host.Image): each owner
// (shell.Request.Owner, a session) gets a container of its own, started
// from the image on the owner's first command and removed when the owner
// ends (EndOwner) or the Template is closed; the agent runs inside it as
// in a running container (New). Containers are run with --rm and
// labelled (TemplateLabel, ServerLabel): the first container a Template
// starts is preceded by the removal of the containers of conch processes
// of this machine that no longer run (a server killed with SIGKILL).
//
// Template is a remote.Owners (shell.Executor, shell.ContextLauncher,
// shell.OwnerEnder, shell.Terminals) whose instances are containers; it
// is safe for concurrent use.
type Template struct {
	*remote.Owners
	host    Host
	opts    Options
	binHash string
	sweep   sync.Once
}

// containerInstance is one owner's container.
type containerInstance struct {
	t    *Template
	name string
	ex   *remote.Executor
}

func (c *containerInstance) Executor() *remote.Executor { return c.ex }
func (c *containerInstance) Name() string               { return c.name }
func (c *containerInstance) Running() bool              { return c.t.running(c.name) }
func (c *containerInstance) Remove() error              { return c.t.remove(c.name) }

// NewTemplate returns a host whose containers are made from h.Image with
// h.Engine; h.Container must be empty. Nothing is started until the
// first command.
func NewTemplate(h Host, o *Options) (*Template, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	switch {
	case h.Image == "":
		return nil, fmt.Errorf("host %s: no image named", h.Name)
	case h.Container != "":
		return nil, fmt.Errorf("host %s: both a container (%s) and an image (%s): a host is a running container or a template", h.Name, h.Container, h.Image)
	case !isEngine(h.Engine):
		return nil, fmt.Errorf("host %s: unknown container engine %q (want %s)", h.Name, h.Engine, strings.Join(Engines, " or "))
	case h.Cwd != "" && !path.IsAbs(h.Cwd):
		return nil, fmt.Errorf("host %s: cwd %q must be absolute", h.Name, h.Cwd)
	}
	if opts.EngineBinary == "" {
		opts.EngineBinary = h.Engine
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	// The agent binary's checksum is read now, for an error at start
	// rather than at the first command.
	probe := h
	probe.Container, probe.Image = "-", ""
	d, err := NewDialer(probe, &opts)
	if err != nil {
		return nil, err
	}
	opts = d.opts
	// Its defaults are those of every remote executor's Resolve.
	ro := opts.Executor
	l := shell.Limits{Cwd: h.Cwd, Timeout: ro.Timeout, MaxTimeout: ro.MaxTimeout, HomeRelative: true}
	if l.Timeout == 0 {
		l.Timeout = remote.DefaultTimeout
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = remote.DefaultMaxTimeout
	}
	t := &Template{host: h, opts: opts, binHash: d.binHash}
	t.Owners = remote.NewOwners(h.Name, l, t.start)
	return t, nil
}

// Name is the host's name.
func (t *Template) Name() string { return t.host.Name }

// running reports whether the container name runs; an engine that
// cannot say is taken to mean it does.
func (t *Template) running(name string) bool {
	args := append([]string{}, t.opts.EngineArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := t.engine(ctx, append(args, "container", "inspect", "--format", "{{.State.Running}}", name)...)
	if err != nil {
		return !isNoSuchContainer(err)
	}
	return strings.TrimSpace(out) != "false"
}

// Containers are the names of the containers running for owners now.
func (t *Template) Containers() []string { return t.Instances() }

// start runs a container of the image and returns it with an executor
// that reaches it. A container whose start failed is removed.
func (t *Template) start(ctx context.Context) (remote.Instance, error) {
	t.sweep.Do(func() { t.removeStale(ctx) })
	var b [6]byte
	rand.Read(b[:])
	name := "conch-" + t.host.Name + "-" + hex.EncodeToString(b[:])
	args := append([]string{}, t.opts.EngineArgs...)
	args = append(args, "run", "-d", "--rm", "--name", name,
		"--label", TemplateLabel+"="+t.host.Name, "--label", ServerLabel+"="+serverID())
	args = append(args, UnmaskArgs[t.host.Engine]...)
	args = append(args, t.opts.RunArgs...)
	// The container's only process waits to be removed; the agent comes
	// with each connection's exec. An image's entrypoint (a program of
	// its own) is replaced.
	args = append(args, "--entrypoint", "sleep", t.host.Image, "2147483647")
	ctx, cancel := context.WithTimeout(ctx, t.opts.StartTimeout)
	defer cancel()
	if _, err := t.engine(ctx, args...); err != nil {
		t.remove(name) // a run cut after it created the container
		return nil, fmt.Errorf("%s run %s: %w", t.host.Engine, t.host.Image, err)
	}
	h := t.host
	h.Container, h.Image = name, ""
	ro := t.opts.Executor
	ro.Cwd = h.Cwd
	ex, err := remote.New(h.Name, &Dialer{host: h, opts: t.opts, binHash: t.binHash}, &ro)
	if err != nil {
		t.remove(name)
		return nil, err
	}
	return &containerInstance{t: t, name: name, ex: ex}, nil
}

// remove removes the container name, killing what runs in it, and
// returns once it is gone. A container already gone is no error.
func (t *Template) remove(name string) error {
	args := append([]string{}, t.opts.EngineArgs...)
	args = append(args, "rm", "-f")
	if t.host.Engine == "podman" {
		args = append(args, "-t", "0") // docker's rm -f kills at once
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := t.engine(ctx, append(args, name)...)
	if err != nil && !isNoSuchContainer(err) {
		return fmt.Errorf("host %s: remove container %s: %w", t.host.Name, name, err)
	}
	return nil
}

func isNoSuchContainer(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "no such container") || strings.Contains(s, "no container with name or id")
}

// engine runs the engine with args and returns its stdout; its error
// names the engine's last words on stderr.
func (t *Template) engine(ctx context.Context, args ...string) (string, error) {
	cmd := exec.Command(t.opts.EngineBinary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := proc.StartCmd(cmd); err != nil { // claimed, as the Dialer's commands
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err := proc.WaitCmd(cmd)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("%w (%v)", context.Cause(ctx), err)
		}
		if msg := engineMessage(errb.String()); msg != "" {
			return "", errors.New(msg)
		}
		return "", err
	}
	return out.String(), nil
}

// engineMessage is the error in what an engine wrote on its standard
// error: its last line that says "error" (podman's "Error: …" after the
// warnings of its retries; docker's "docker: Error response from daemon:
// …" before its advice to run --help), else its last line.
func engineMessage(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(strings.ToLower(lines[i]), "error") {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
